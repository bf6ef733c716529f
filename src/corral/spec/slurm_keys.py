"""slurm.conf parameters as data: the keys Slurm knows (slurm.conf(5)), the keys corral renders itself,
and the keys a spec's `extra` may not set. The spec's rules (spec/rules.py) and the slurm.conf lint
(render/slurm_lint.py) both read them from here; render/slurm.py writes exactly the RENDERED keys
(tests/unit/test_slurm_extra.py renders every one and checks that nothing else appears).
"""

from __future__ import annotations

import functools


def canonical(words: str) -> dict[str, str]:
    """lowercase key -> its spelling in slurm.conf(5) (Slurm reads keys case-insensitively)."""
    return {w.lower(): w for w in words.split()}


def _keys(words: str) -> frozenset[str]:
    return frozenset(canonical(words))


GLOBAL_KEYS = canonical("""
AccountingStorageBackupHost AccountingStorageEnforce AccountingStorageExternalHost AccountingStorageHost
AccountingStorageParameters AccountingStoragePass AccountingStoragePort AccountingStorageTRES
AccountingStorageType AccountingStorageUser AccountingStoreFlags AcctGatherEnergyType AcctGatherFilesystemType
AcctGatherInterconnectType AcctGatherNodeFreq AcctGatherProfileType AllowSpecResourcesUsage AuthAltParameters
AuthAltTypes AuthInfo AuthType BackupAddr BackupController BatchStartTimeout BcastExclude BcastParameters
BurstBufferType CliFilterPlugins ClusterName CommunicationParameters CompleteWait ControlAddr ControlMachine
CoreSpecPlugin CpuFreqDef CpuFreqGovernors CredType CryptoType DebugFlags DefCpuPerGPU DefMemPerCPU DefMemPerGPU
DefMemPerNode DependencyParameters DisableRootJobs EioTimeout EnforcePartLimits Epilog EpilogMsgTime
EpilogSlurmctld ExtSensorsFreq ExtSensorsType FairShareDampeningFactor FederationParameters FirstJobId
GetEnvTimeout GpuFreqDef GresTypes GroupUpdateForce GroupUpdateTime HashPlugin HealthCheckInterval
HealthCheckNodeState HealthCheckProgram InactiveLimit InteractiveStepOptions JobAcctGatherFrequency
JobAcctGatherParams JobAcctGatherType JobCompHost JobCompLoc JobCompParams JobCompPass JobCompPort JobCompType
JobCompUser JobContainerType JobFileAppend JobRequeue JobSubmitPlugins KillOnBadExit KillWait LaunchParameters
LaunchType Licenses LogTimeFormat MailDomain MailProg MaxArraySize MaxBatchRequeue MaxDBDMsgs MaxJobCount
MaxJobId MaxMemPerCPU MaxMemPerNode MaxNodeCount MaxStepCount MaxTasksPerNode MCSParameters MCSPlugin
MessageTimeout MinJobAge MpiDefault MpiParams NamespaceType NodeFeaturesPlugins OverTimeLimit PluginDir PlugStackConfig
PowerParameters PowerPlugin PreemptExemptTime PreemptMode PreemptParameters PreemptType PrEpParameters
PrEpPlugins PriorityCalcPeriod PriorityDecayHalfLife PriorityFavorSmall PriorityFlags PriorityMaxAge
PriorityParameters PrioritySiteFactorParameters PrioritySiteFactorPlugin PriorityType PriorityUsageResetPeriod
PriorityWeightAge PriorityWeightAssoc PriorityWeightFairshare PriorityWeightJobSize PriorityWeightPartition
PriorityWeightQOS PriorityWeightTRES PrivateData ProctrackType Prolog PrologEpilogTimeout PrologFlags
PrologSlurmctld PropagatePrioProcess PropagateResourceLimits PropagateResourceLimitsExcept RebootProgram
ReconfigFlags RequeueExit RequeueExitHold ResumeFailProgram ResumeProgram ResumeRate ResumeTimeout ResvEpilog
ResvOverRun ResvProlog ReturnToService RoutePlugin SchedulerParameters SchedulerTimeSlice SchedulerType
ScronParameters SelectType SelectTypeParameters SlurmctldAddr SlurmctldDebug SlurmctldHost SlurmctldLogFile
SlurmctldParameters SlurmctldPidFile SlurmctldPort SlurmctldPrimaryOffProg SlurmctldPrimaryOnProg
SlurmctldSyslogDebug SlurmctldTimeout SlurmdDebug SlurmdLogFile SlurmdParameters SlurmdPidFile SlurmdPort
SlurmdSpoolDir SlurmdSyslogDebug SlurmdTimeout SlurmdUser SlurmSchedLogFile SlurmSchedLogLevel SlurmUser
SrunEpilog SrunPortRange SrunProlog StateSaveLocation SuspendExcNodes SuspendExcParts SuspendExcStates
SuspendProgram SuspendRate SuspendTime SuspendTimeout SwitchParameters SwitchType TaskEpilog TaskPlugin
TaskPluginParam TaskProlog TCPTimeout TmpFS TopologyParam TopologyPlugin TrackWCKey TreeWidth
UnkillableStepProgram UnkillableStepTimeout UsePAM VSizeFactor WaitTime X11Parameters
""")
NODE_KEYS = canonical("""NodeName NodeHostname NodeAddr BcastAddr Boards CoreSpecCount CoresPerSocket CpuBind
    CPUs CpuSpecList Feature Features Gres MemSpecLimit Parameters Port Procs RealMemory Reason
    RestrictedCoresPerGPU Sockets SocketsPerBoard State ThreadsPerCore TmpDisk TRESWeights Weight""")
PARTITION_KEYS = canonical("""PartitionName AllocNodes AllowAccounts AllowGroups AllowQos Alternate CpuBind
    Default DefaultTime DefCpuPerGPU DefMemPerCPU DefMemPerGPU DefMemPerNode DenyAccounts DenyQos
    DisableRootJobs ExclusiveTopo ExclusiveUser GraceTime Hidden LLN MaxCPUsPerNode MaxCPUsPerSocket
    MaxMemPerCPU MaxMemPerNode MaxNodes MaxTime MinNodes Nodes OverSubscribe OverTimeLimit
    PowerDownOnIdle PreemptMode PriorityJobFactor PriorityTier QOS ReqResv ResumeTimeout RootOnly
    SelectTypeParameters Shared State SuspendTime SuspendTimeout TRESBillingWeights""")

SLURM_KEYS = frozenset(GLOBAL_KEYS)  # lowercase, as the lint compares them
SLURM_REPEATABLE = _keys("SlurmctldHost")  # one line per controller, in failover order
SLURM_LINES = {  # a line starting with the key: the keys that line may carry (lowercase)
    "nodename": frozenset(NODE_KEYS),
    "partitionname": frozenset(PARTITION_KEYS),
    "nodeset": _keys("NodeSet Feature Nodes"),
    "downnodes": _keys("DownNodes Reason State"),
}
# keys whose value is a program (or plugin config) Slurm runs, as root or SlurmUser
PROGRAM_KEYS = _keys("""Prolog Epilog PrologSlurmctld EpilogSlurmctld TaskProlog TaskEpilog SrunProlog SrunEpilog
    HealthCheckProgram RebootProgram ResumeProgram ResumeFailProgram SuspendProgram MailProg ResvProlog ResvEpilog
    SlurmctldPrimaryOnProg SlurmctldPrimaryOffProg UnkillableStepProgram PlugStackConfig PluginDir JobCompLoc
    JobCompPassScript SlurmctldPlugstack""")

# What render/slurm.py writes itself: key -> the spec key that sets it ("" when corral sets it alone).
RENDERED_KEYS: dict[str, str] = {
    "ClusterName": "name", "SlurmctldHost": "nodes[].roles (controller)", "SlurmctldParameters": "",
    "SlurmUser": "", "AuthType": "", "CredType": "", "CryptoType": "",
    "StateSaveLocation": "slurm.state_save_location", "SlurmctldTimeout": "slurm.slurmctld_timeout_s",
    "SlurmdSpoolDir": "", "SlurmctldPidFile": "", "SlurmdPidFile": "", "SlurmctldLogFile": "",
    "SlurmdLogFile": "", "MpiDefault": "", "ReturnToService": "", "CommunicationParameters": "",
    "SelectType": "", "SelectTypeParameters": "", "GresTypes": "", "ProctrackType": "", "TaskPlugin": "",
    "JobAcctGatherType": "", "DefMemPerGPU": "slurm.def_mem_per_gpu_mb",
    "AccountingStorageType": "nodes[].roles (accounting)", "AccountingStorageHost": "nodes[].roles (accounting)",
    "AccountingStorageTRES": "", "AccountingStorageEnforce": "slurm.enforce_limits",
    "PriorityType": "slurm.fairshare.enabled", "PriorityDecayHalfLife": "slurm.fairshare.decay_half_life",
    "PriorityWeightFairshare": "slurm.fairshare.weight_fairshare", "PriorityWeightAge": "slurm.fairshare.weight_age",
    "PriorityWeightQOS": "slurm.fairshare.weight_qos", "PriorityWeightJobSize": "slurm.fairshare.weight_jobsize",
    "PriorityWeightPartition": "slurm.fairshare.weight_partition", "PreemptType": "slurm.qos[].preempt",
    "PreemptMode": "slurm.qos[].preempt_mode", "HealthCheckProgram": "health.enabled",
    "HealthCheckInterval": "health.interval_s", "HealthCheckNodeState": "", "Prolog": "", "Epilog": "",
    "TaskProlog": "fabric (the job environment)",
    "PrologFlags": "identity.pam_slurm_adopt, slurm.clean_jobs", "JobContainerType": "slurm.clean_jobs",
    "NamespaceType": "slurm.clean_jobs",
    "SuspendProgram": "power.enabled", "ResumeProgram": "power.enabled", "ResumeFailProgram": "power.enabled",
    "SuspendTime": "power.suspend_after", "SuspendTimeout": "power.suspend_timeout",
    "ResumeTimeout": "power.resume_timeout", "SuspendExcNodes": "power.exclude",
    "TopologyPlugin": "topology (switches: topology/tree, blocks: topology/block)",
    "RoutePlugin": "topology.route (before Slurm 23.11)", "TopologyParam": "topology.route (Slurm 23.11 on)",
}
RENDERED_PARTITION_KEYS: dict[str, str] = {
    "PartitionName": "slurm.partitions[].name", "Nodes": "slurm.partitions[].nodes",
    "Default": "slurm.partitions[].default", "MaxTime": "slurm.partitions[].max_time",
    "PriorityTier": "slurm.partitions[].priority_tier", "QOS": "slurm.partitions[].qos",
    "DefMemPerCPU": "", "OverSubscribe": "", "State": "",
}
_DEF_MEM = ("Slurm takes one of DefMemPerCPU, DefMemPerGPU, DefMemPerNode per scope, and corral sets "
            "DefMemPerGPU (slurm.def_mem_per_gpu_mb) and each partition's DefMemPerCPU")
# Not rendered, but corral relies on Slurm's default (or the key is an old spelling of a rendered one).
RESERVED_KEYS: dict[str, str] = {
    "SlurmctldPort": "corral relies on its default 6817 (configless slurmd, doctor)",
    "SlurmdPort": "corral relies on its default 6818 (doctor)",
    "AccountingStoragePort": "corral relies on its default 6819 (slurmdbd, doctor)",
    "SlurmdUser": "corral's prolog, epilog and health check run as slurmd's user, root",
    "ControlMachine": "an old spelling of SlurmctldHost, which corral renders",
    "ControlAddr": "an old spelling of SlurmctldHost, which corral renders",
    "BackupController": "an old spelling of SlurmctldHost, which corral renders",
    "BackupAddr": "an old spelling of SlurmctldHost, which corral renders",
    "DefMemPerCPU": _DEF_MEM, "DefMemPerNode": _DEF_MEM,
}
RESERVED_PARTITION_KEYS: dict[str, str] = {
    "Shared": "an old spelling of OverSubscribe, which corral renders",
    "DefMemPerGPU": _DEF_MEM, "DefMemPerNode": _DEF_MEM,
}


@functools.cache
def _per_release(kind: str) -> dict[str, dict[str, str]]:
    """major -> its `kind` keys (lowercase -> spelling), read once from spec/slurm_conf_keys.py."""
    from corral.spec.slurm_conf_keys import RELEASES
    return {major: canonical(r[kind]) for major, r in sorted(RELEASES.items())}


def release_keys(major: str | None, kind: str) -> dict[str, str] | None:
    """`kind` ("global", "partition") parameters of Slurm `major` as its own slurm.conf(5) lists them
    (spec/slurm_conf_keys.py, read from Debian's packages); None for a release not read."""
    return _per_release(kind).get(major or "")


def every_release(kind: str) -> dict[str, str]:
    """`kind` parameters of every release read: with the hand list, what any Slurm corral knows takes."""
    return {k: v for keys in _per_release(kind).values() for k, v in keys.items()}


def releases_knowing(key: str, kind: str) -> list[str]:
    return [m for m, keys in _per_release(kind).items() if key.lower() in keys]
