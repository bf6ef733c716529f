"""slurm.conf from the spec (+ `slurmd -C` facts): pure and deterministic.

Configless Slurm: this file lives on the controller(s) and login nodes only; every slurmd fetches it
(and gres.conf, cgroup.conf) from slurmctld. Nodes are reached by NodeAddr, so no DNS is needed.
Only nodes with the `compute` role run slurmd and get a NodeName line. The spec's pass-through keys
(slurm.extra, slurm.partitions[].extra) come last, sorted: global ones after everything, a partition's
at the end of its line; the keys corral writes itself are spec/slurm_keys.py's RENDERED_KEYS.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence

from corral.errors import CorralError
from corral.facts.records import NodeHW
from corral.render.job_container import slurm_lines as job_container_lines
from corral.render.hw import hostlist, name_key, node_runs, real_memory
from corral.render.mig import gres_text, spec_types
from corral.render.power import slurm_lines as power_lines
from corral.render.topology import slurm_lines as topology_lines
from corral.spec.cluster import Cluster, Node
from corral.spec.gpus import generation
from corral.spec.partitions import partition_specs
from corral.spec.shared import state_save_location
from corral.spec.slurm_keys import RENDERED_KEYS, RENDERED_PARTITION_KEYS
from corral import paths

Version = tuple[int, int]
DEFAULT_VERSION: Version = (22, 5)
FALLBACK_MEM_PER_CPU_MB = 1024  # DefMemPerCPU where no node of a partition has known CPUs and memory
_VERSION = re.compile(r"(?<![\d.])(\d{2})\.(\d{1,2})(?![\d])")


HEALTH_PROGRAM = paths.HEALTH
PROLOG, EPILOG, TASK_PROLOG = paths.PROLOG, paths.EPILOG, paths.TASK_PROLOG


def slurm_version_tuple(text: str) -> Version:
    """'22.05.8' -> (22, 5); 'slurm-wlm 23.11.4' -> (23, 11); 'slurm 24.05.0-0rc1' -> (24, 5)."""
    m = _VERSION.search(text)
    if not m:
        raise CorralError("cannot read a Slurm version", value=text.strip()[:80],
                          fix="pass a version like '22.05.8' (from `sinfo --version` or dpkg)")
    return int(m.group(1)), int(m.group(2))


def header(cluster: Cluster, version: Version) -> list[str]:
    return [f"# Managed by corral from {cluster.path.name} — do not edit",
            f"# Slurm {version[0]}.{version[1]:02d}"]


def compute_nodes(cluster: Cluster) -> list[Node]:
    """Nodes that run slurmd, in natural name order."""
    return sorted(cluster.with_role("compute"), key=lambda n: name_key(n.name))


def _features(node: Node) -> str | None:
    if node.gpus is None:
        return None
    gen = generation(node.gpus.model)  # unknown models get no generation feature
    extra = ["nvlink"] if node.gpus.nvlink else []
    return ",".join([node.gpus.model, *([gen] if gen else []), "gpu", *extra])


def cpus(facts: NodeHW) -> int:
    """CPUs to declare: slurmctld refuses to start (cons_tres) when CPUs is neither Sockets*Cores nor
    Sockets*Cores*Threads, so facts that do not add up (lscpu on a node with offline CPUs) declare
    Sockets*Cores*Threads, which is never more than the node has."""
    cores = facts.sockets * facts.cores_per_socket
    threads = cores * facts.threads_per_core
    return facts.cpus if facts.cpus in (cores, threads) else threads


def _node_attrs(cluster: Cluster, node: Node, hw: Mapping[str, NodeHW]) -> tuple[str, ...]:
    attrs = []
    facts = hw.get(node.name)
    if facts is not None and min(facts.sockets, facts.cores_per_socket, facts.threads_per_core) > 0:
        attrs += [f"CPUs={cpus(facts)}", f"Sockets={facts.sockets}",
                  f"CoresPerSocket={facts.cores_per_socket}", f"ThreadsPerCore={facts.threads_per_core}"]
    mem = real_memory(cluster, node, hw)
    if mem:
        attrs.append(f"RealMemory={mem}")
    if node.gpus is not None:  # MIG devices as the node's facts found them (render/mig.py)
        attrs.append(f"Gres={gres_text(node.gpus.model, node.gpus.count, facts)}")
    features = _features(node)
    if features:
        attrs.append(f"Features={features}")
    return tuple(attrs + ["State=UNKNOWN"])


def node_lines(cluster: Cluster, hw: Mapping[str, NodeHW], compute: list[Node]) -> list[str]:
    """NodeName lines for `compute` (in natural name order), alike neighbours merged into one line."""
    runs = node_runs((n.name, n.address, _node_attrs(cluster, n, hw)) for n in compute)
    return [" ".join([f"NodeName={r.name_text()}", f"NodeAddr={r.address_text()}", *r.attrs]) for r in runs]


def def_mem_per_gpu(cluster: Cluster, hw: Mapping[str, NodeHW]) -> int | None:
    """slurm.def_mem_per_gpu_mb, else the smallest RealMemory / GPUs over GPU nodes (None: unknown)."""
    gpu_nodes = [n for n in cluster.with_role("compute") if n.gpus is not None]
    if not gpu_nodes:
        return None
    if cluster.spec.slurm.def_mem_per_gpu_mb:
        return cluster.spec.slurm.def_mem_per_gpu_mb
    per_gpu = [mem // n.gpu_count for n in gpu_nodes if (mem := real_memory(cluster, n, hw))]
    return max(1, min(per_gpu)) if per_gpu else None


def def_mem_per_cpu(cluster: Cluster, nodes: list[Node], hw: Mapping[str, NodeHW]) -> int:
    """Smallest RealMemory / CPUs over `nodes` (never 0): a job without --mem gets a share of a node,
    not all of it, so jobs can share nodes (GPU jobs get DefMemPerGPU instead: Slurm's cons_tres
    takes the GRES default over this one when the job asks for GPUs and no memory)."""
    shares, known = [], []
    for n in nodes:
        mem, facts = real_memory(cluster, n, hw), hw.get(n.name)
        if mem:
            known.append(mem)
            if facts and cpus(facts) > 0:
                shares.append(mem // cpus(facts))
    if shares:
        return max(1, min(shares))
    return max(1, min([FALLBACK_MEM_PER_CPU_MB, *known]))


def extra_words(extra: Mapping[str, str], rendered: Mapping[str, str], where: str) -> list[str]:
    """`Key=Value` of pass-through keys, sorted; a key corral renders itself is refused (spec check
    refuses it first, located: spec/rules.py)."""
    ours = {k.lower() for k in rendered}
    clash = sorted(k for k in extra if k.lower() in ours)
    if clash:
        raise CorralError(f"{where}.{clash[0]}: corral renders this key", value=clash[0],
                          fix="remove it from the spec (`corral spec check` names the spec key)")
    return [f"{k}={v}" for k, v in sorted(extra.items(), key=lambda kv: kv[0].lower())]


def _partitions(cluster: Cluster, hw: Mapping[str, NodeHW], compute: list[Node],
                accounting: bool) -> list[str]:
    """The partitions' lines (partition_specs). A partition QOS needs the accounting database, so it is
    left out without one."""
    by_name = {n.name: n for n in compute}
    specs = partition_specs(cluster, compute)
    lines = []
    for name, names, is_default, max_time, tier, qos, extra in specs:
        words = [f"PartitionName={name}"] + ([f"Nodes={hostlist(names)}"] if names else [])
        if is_default:
            words.append("Default=YES")
        words += [f"MaxTime={max_time}", f"PriorityTier={tier}"]
        if qos and accounting:
            words.append(f"QOS={qos}")
        words.append(f"DefMemPerCPU={def_mem_per_cpu(cluster, [by_name[x] for x in names], hw)}")
        words += ["OverSubscribe=NO", "State=UP"]
        words += extra_words(extra, RENDERED_PARTITION_KEYS, f"slurm.partitions[{name}].extra")
        lines.append(" ".join(words))
    return lines


def preempt_mode(cluster: Cluster) -> str | None:
    """Cluster-wide PreemptMode when some QOS preempts another (None: no preemption). Each QOS's own
    mode is set in the database; this is the default, and SUSPEND needs GANG at the cluster level."""
    qos = cluster.spec.slurm.qos
    if not any(q.preempt for q in qos):
        return None
    modes = Counter(q.preempt_mode for q in qos if q.preempt_mode != "off")
    order = ("requeue", "cancel", "suspend")  # most used wins; ties go to the earlier one
    base = max(order, key=lambda m: (modes[m], -order.index(m)))
    return base.upper() + (",GANG" if modes["suspend"] else "")


def prolog_flags(cluster: Cluster) -> list[str]:
    """PrologFlags, one key for every flag corral needs: Contain (the job's extern step, which implies
    Alloc) when identity.pam_slurm_adopt adopts SSH sessions on compute nodes (deploy/adopt.py), and for
    slurm.clean_jobs (job_container/tmpfs makes the job's namespace in it)."""
    adopt = cluster.spec.identity.pam_slurm_adopt or cluster.spec.slurm.clean_jobs
    return ["Contain"] if adopt and cluster.with_role("compute") else []


def render_slurm_conf(cluster: Cluster, hw: Mapping[str, NodeHW], *,
                      version: Version = DEFAULT_VERSION, without_hooks: Sequence[str] = (),
                      fabric: Mapping[str, str] | None = None,
                      added: Mapping[str, tuple[str, str]] | None = None) -> str:
    """slurm.conf for `version` (major, minor); `hw` holds the `slurmd -C` facts of the nodes probed
    so far (a node without facts gets what the spec knows). `without_hooks`: compute nodes without
    corral's Prolog/Epilog yet - then slurm.conf names none (a missing Prolog would drain the node).
    `fabric`: node -> ibnetdiscover output, for `topology: {discover: infiniband}` (render/topology.py).
    `added`: the keys components declare (Component.slurm_conf, components/views.slurm_conf): key -> (value,
    the component's name), e.g. slurm.rest's JWT keys; written after corral's own, before the nodes."""
    slurm = cluster.spec.slurm
    controllers = cluster.with_role("controller")
    acct = next(iter(cluster.with_role("accounting")), None)
    compute = compute_nodes(cluster)
    out = header(cluster, version) + [f"ClusterName={cluster.name}"]
    out += [f"SlurmctldHost={c.name}({c.address})" for c in controllers]
    out += ["SlurmctldParameters=enable_configless", "SlurmUser=slurm", "AuthType=auth/munge",
            "CredType=cred/munge" if version >= (19, 5) else "CryptoType=crypto/munge",
            f"StateSaveLocation={state_save_location(cluster)}", "SlurmdSpoolDir=/var/lib/slurm/slurmd",
            "SlurmctldPidFile=/run/slurmctld.pid", "SlurmdPidFile=/run/slurmd.pid",
            "SlurmctldLogFile=/var/log/slurm/slurmctld.log", "SlurmdLogFile=/var/log/slurm/slurmd.log",
            "MpiDefault=none", "ReturnToService=2"]
    if slurm.slurmctld_timeout_s is not None:
        out.append(f"SlurmctldTimeout={slurm.slurmctld_timeout_s}")
    if any(":" in n.address for n in [*controllers, *compute, *([acct] if acct else [])]):
        out.append("CommunicationParameters=EnableIPv6")
    out += ["", "# Scheduling: cores and memory are consumable; GPUs are typed GRES",
            "SelectType=select/cons_tres", "SelectTypeParameters=CR_Core_Memory", "GresTypes=gpu",
            "ProctrackType=proctrack/cgroup", "TaskPlugin=task/cgroup,task/affinity",
            "JobAcctGatherType=jobacct_gather/cgroup"]
    per_gpu = def_mem_per_gpu(cluster, hw)
    if per_gpu:
        out.append(f"DefMemPerGPU={per_gpu}")
    gpu_types = sorted({n.gpus.model for n in compute if n.gpus} | spec_types(cluster)
                       | {d.profile for n in compute for d in (hw[n.name].mig if n.name in hw else ())})
    if acct is None:
        out += ["", "# No node has the accounting role: no slurmdbd, so no accounting, fair-share,",
                "# QOS limits or preemption."]
    else:
        out += ["", "# Accounting (slurmdbd)", "AccountingStorageType=accounting_storage/slurmdbd",
                f"AccountingStorageHost={acct.address}",
                "AccountingStorageTRES=" + ",".join(["gres/gpu"] + [f"gres/gpu:{t}" for t in gpu_types])]
        if slurm.enforce_limits:
            out.append("AccountingStorageEnforce=associations,limits,qos,safe")
        fs = slurm.fairshare
        if fs.enabled:
            out += ["", "# Priority: multifactor with fair-share", "PriorityType=priority/multifactor",
                    f"PriorityDecayHalfLife={fs.decay_half_life}",
                    f"PriorityWeightFairshare={fs.weight_fairshare}", f"PriorityWeightAge={fs.weight_age}",
                    f"PriorityWeightQOS={fs.weight_qos}", f"PriorityWeightJobSize={fs.weight_jobsize}",
                    f"PriorityWeightPartition={fs.weight_partition}"]
        mode = preempt_mode(cluster)
        if mode:
            out += ["", "# Preemption by QOS", "PreemptType=preempt/qos", f"PreemptMode={mode}"]
    if cluster.spec.health.enabled:
        out += ["", "# Node health: corral-health drains a failing node, resumes the nodes it drained",
                f"HealthCheckProgram={HEALTH_PROGRAM}", f"HealthCheckInterval={cluster.spec.health.interval_s}",
                "HealthCheckNodeState=ANY"]
    if without_hooks:
        out += ["", f"# Job hooks: not named until every compute node has them; missing on {hostlist(list(without_hooks))}",
                "# (apply to those nodes, then to the controller)"]
    else:
        out += ["", "# Job hooks on compute nodes (GPU job mapping, per-user enroot directories; the job environment)",
                f"Prolog={PROLOG}", f"Epilog={EPILOG}"]
        # with pyxis the job environment comes from corral's SPANK plugin (plugstack.conf): a TaskProlog runs
        # inside the container, where Slurm 24.11+ cannot start it (render/spank_env.py)
        out += [f"TaskProlog={TASK_PROLOG}"] if cluster.spec.nvidia.pyxis is None else []
    out += power_lines(cluster)  # render/power.py: SuspendProgram & co. when power.enabled
    flags = prolog_flags(cluster)
    if flags:
        out += ["", "# pam_slurm_adopt: every job gets an extern step on its nodes; its user's SSH sessions join it",
                "PrologFlags=" + ",".join(flags)]
    out += job_container_lines(cluster, version)  # render/job_container.py: slurm.clean_jobs
    out += topology_lines(cluster, version, fabric)
    added = added or {}
    for name in dict.fromkeys(c for _, c in added.values()):
        out += ["", f"# {name} (components/slurm.py)", *(f"{k}={v}" for k, (v, c) in added.items() if c == name)]
    out += ["", "# Nodes"]
    unknown = [n.name for n in compute if n.name not in hw]
    if unknown:
        out.append(f"# not yet probed (no CPUs; RealMemory only from the spec): {hostlist(unknown)}")
    out += node_lines(cluster, hw, compute)
    out += ["", "# Partitions", *_partitions(cluster, hw, compute, acct is not None)]
    if slurm.extra:
        out += ["", "# More slurm.conf parameters (slurm.extra)",
                *extra_words(slurm.extra, {**RENDERED_KEYS, **added}, "slurm.extra")]
    return "\n".join(out) + "\n"
