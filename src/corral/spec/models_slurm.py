"""The `slurm:` section of the spec: partitions, QOS, accounts, fair-share, pass-through slurm.conf keys.

Each description names the slurm.conf parameter (render/slurm.py) or the sacctmgr setting
(deploy/sacct_sync.py) the field controls.
"""

from __future__ import annotations

import ipaddress
from typing import Annotated, Literal

from pydantic import BeforeValidator, Field, field_validator, model_validator

from corral import paths
from corral.spec.models_base import Strict
from corral.spec.types import AbsPath, ConfigWord, SlurmDuration, SlurmName, UserName

NAME = r"^[a-z0-9]([a-z0-9_-]{0,62})$"
SLURM_TIME = r"^(INFINITE|UNLIMITED|\d+|\d+:\d{2}(:\d{2})?|\d+-\d{1,2}(:\d{2}(:\d{2})?)?)$"
HOSTLIST = r"^[A-Za-z0-9._,\[\]-]+$"  # a Slurm hostlist expression: names, ranges, commas


def _scalar_text(v: object) -> object:
    """A YAML number or boolean as slurm.conf writes it: 4 -> "4", true -> "YES", false -> "NO"."""
    if isinstance(v, bool):
        return "YES" if v else "NO"
    return str(v) if isinstance(v, (int, float)) else v


SlurmValue = Annotated[ConfigWord, BeforeValidator(_scalar_text)]


class Partition(Strict):
    """One Slurm partition: a PartitionName= line in slurm.conf."""

    name: str = Field(pattern=NAME, description="PartitionName in slurm.conf (`-p NAME` of sbatch/srun)")
    nodes: str = Field(default="ALL", pattern=HOSTLIST,
                       description="partition Nodes: a hostlist of compute nodes of the spec, or ALL "
                                   "(every compute node)")
    default: bool = Field(default=False, description="partition Default=YES (jobs without -p run here); "
                                                     "none set: the first partition")
    max_time: SlurmDuration = Field(default="INFINITE", description="partition MaxTime in slurm.conf "
                                                                    "(the longest time limit of a job)")
    qos: SlurmName | None = Field(default=None, description="partition QOS in slurm.conf (one of slurm.qos; "
                                                            "left out without an accounting node)")
    priority_tier: int = Field(default=1, ge=0, le=65533,
                               description="partition PriorityTier in slurm.conf: jobs of a higher tier "
                                           "are scheduled first")
    extra: dict[str, SlurmValue] = Field(
        default_factory=dict,
        description="more PartitionName= parameters (slurm.conf(5)) corral does not render, e.g. "
                    "`AllowAccounts: research`; one word each (true/false: YES/NO); at the end of the partition's "
                    "line, sorted")


class QOS(Strict):
    """A Slurm QOS, created and kept in sync in the accounting database with sacctmgr."""

    name: str = Field(pattern=NAME, description="QOS name (sacctmgr add qos)")
    priority: int = Field(default=0, ge=0, description="QOS Priority (weighted by PriorityWeightQOS)")
    max_gpus_per_user: int | None = Field(default=None, ge=0,
                                          description="QOS MaxTRESPerUser=gres/gpu=N: GPUs one user's running "
                                                      "jobs may hold; unset: no limit")
    max_jobs_per_user: int | None = Field(default=None, ge=0,
                                          description="QOS MaxJobsPerUser: running jobs per user; unset: no limit")
    max_wall: SlurmDuration | None = Field(default=None, description="QOS MaxWall: the longest time limit of "
                                                                     "a job in this QOS; unset: no limit")
    preempt: list[SlurmName] = Field(default_factory=list,
                                     description="QOS Preempt: QOSes whose jobs this QOS's jobs may preempt "
                                                 "(any: PreemptType=preempt/qos in slurm.conf)")
    preempt_mode: Literal["off", "cancel", "requeue", "suspend"] = Field(
        default="off", description="QOS PreemptMode (how its preempted jobs stop); the most used one is also "
                                   "slurm.conf PreemptMode (suspend adds GANG)")


class Account(Strict):
    """A Slurm account and its users in the accounting database (sacctmgr)."""

    name: str = Field(pattern=NAME, description="account name (sacctmgr add account)")
    parent: SlurmName | None = Field(default=None, description="account Parent; unset: root")
    fairshare: int = Field(default=1, ge=0, description="account Fairshare: its share among its siblings")
    users: list[UserName] = Field(default_factory=list,
                                  description="users of the account (sacctmgr add user NAME Account=...); "
                                              "checked here, before any plan")
    qos: list[SlurmName] = Field(default_factory=list,
                                 description="association QOS: the QOSes the account and its users may use; "
                                             "empty: left as it is")
    default_qos: SlurmName | None = Field(default=None,
                                          description="association DefaultQOS of the account and its users")


class FairShare(Strict):
    """Multifactor job priority with fair-share (needs a node with the accounting role)."""

    enabled: bool = Field(default=True, description="PriorityType=priority/multifactor in slurm.conf; "
                                                    "false: Slurm's default (first in, first out)")
    weight_fairshare: int = Field(default=10000, ge=0, description="PriorityWeightFairshare")
    weight_age: int = Field(default=1000, ge=0, description="PriorityWeightAge")
    weight_qos: int = Field(default=5000, ge=0, description="PriorityWeightQOS")
    weight_jobsize: int = Field(default=0, ge=0, description="PriorityWeightJobSize")
    weight_partition: int = Field(default=0, ge=0, description="PriorityWeightPartition")
    decay_half_life: SlurmDuration = Field(default="7-0", description="PriorityDecayHalfLife: how fast "
                                                                      "past usage is forgotten")


SLURM_VERSION = r"^\d{2}\.\d{2}(\.\d{1,3})?$"  # a major release (22.05) or a maintenance release (22.05.8)


class SlurmRest(Strict):
    """The Slurm REST API: Debian's slurmrestd on every controller, JWT authentication (render/slurm_rest.py)."""

    port: int = Field(default=6820, ge=1024, le=65535,
                      description="the TCP port slurmrestd listens on, on each controller's cluster address")
    clients: list[Literal["controller", "compute", "login", "accounting", "monitoring", "nfs"]
                  | ipaddress.IPv4Network | ipaddress.IPv6Network] = Field(
        default=["login"], min_length=1,
        description="who may reach it (the others get a TCP reset): roles (their nodes' cluster addresses) or "
                    "networks (a portal's, e.g. 10.1.2.0/24); the controllers themselves always may. Users "
                    "authenticate with a token of their own from `scontrol token`")

    @field_validator("port")
    @classmethod
    def _not_slurms(cls, port: int) -> int:
        if port in (6817, 6818, 6819):
            raise ValueError(f"{port} is Slurm's own (slurmctld 6817, slurmd 6818, slurmdbd 6819)")
        return port

    @field_validator("clients")
    @classmethod
    def _not_everyone(cls, clients: list) -> list:
        for c in clients:
            if not isinstance(c, str) and (c.prefixlen == 0 or not c.is_private):
                raise ValueError(f"{c} is the whole internet or a public network: name the clients' own network")
        return clients


class SlurmSpec(Strict):
    """slurm.conf, gres.conf and the accounting database (scheduler: slurm)."""

    version: str | None = Field(
        default=None, pattern=SLURM_VERSION,
        description="the Slurm release on every Slurm node: `22.05` (any 22.05.x) or `22.05.8`; an apt pin "
                    "(/etc/apt/preferences.d/corral-slurm) holds the packages there; a different installed "
                    "version is upgraded in Slurm's order (backup, slurmdbd, slurmctld, then slurmd under "
                    "`rollout:`; docs/operations.md); downgrades and jumps Slurm does not support are refused. "
                    "Unset: the distribution's version, no pin")

    partitions: list[Partition] = Field(default_factory=list,
                                        description="partitions; none: one partition `gpu` (`batch` without "
                                                    "GPUs) of every compute node")
    qos: list[QOS] = Field(default_factory=list, description="QOSes (sacctmgr); `normal` always exists")
    accounts: list[Account] = Field(default_factory=list, description="accounts and their users (sacctmgr)")
    fairshare: FairShare = Field(default=FairShare(), description="job priority (Priority* in slurm.conf)")
    enforce_limits: bool = Field(default=True, description="AccountingStorageEnforce=associations,limits,"
                                                           "qos,safe: jobs need an account and obey QOS limits")
    def_mem_per_gpu_mb: int | None = Field(default=None, ge=1,
                                           description="DefMemPerGPU in slurm.conf: memory per GPU of a job "
                                                       "that asks for none; unset: node memory / GPUs "
                                                       "(smallest over GPU nodes)")
    gres_autodetect: Literal["off", "nvml"] = Field(
        default="off", description="gres.conf AutoDetect: off lists /dev/nvidiaN from the spec; nvml lets "
                                   "slurmd find the GPUs")
    state_save_location: AbsPath = Field(
        default=paths.SLURMCTLD_STATE,
        description="StateSaveLocation in slurm.conf: slurmctld's queue, node states and job IDs (corral backup); "
                    "with two controllers it must be on a storage.mounts entry mounted on both")
    slurmctld_timeout_s: int | None = Field(
        default=None, ge=3, le=3600,
        description="SlurmctldTimeout in slurm.conf: seconds the backup controller waits for the primary "
                    "before it takes over; unset: Slurm's default (120)")
    clean_jobs: bool = Field(
        default=False,
        description="clean job environments on compute nodes: each job gets a private /tmp and /dev/shm "
                    "(JobContainerType=job_container/tmpfs up to 25.05, NamespaceType=namespace/tmpfs from "
                    "25.11; job_container.conf; PrologFlags=Contain), removed when it ends; when a user's last "
                    "job on a node ends, the processes they left there are ended; a node whose GPUs still hold "
                    "processes after a job is drained with a reason (corral's Epilog). An upgrade across 25.11 "
                    "is refused while it is on: turn it off for that upgrade")
    job_tmp_path: AbsPath = Field(
        default="/var/lib/slurm/job_tmp",
        description="BasePath in job_container.conf: where each job's private /tmp lives, on the compute "
                    "node's local disk (not on shared storage, not under /tmp or /dev/shm); made by slurmd")
    rest: SlurmRest | None = Field(
        default=None, description="the Slurm REST API (slurmrestd, JWT tokens from `scontrol token`) on the "
                                  "controllers: docs/components/slurm-rest.md; unset: none (removed if it was there)")
    extra: dict[str, SlurmValue] = Field(
        default_factory=dict,
        description="more slurm.conf parameters (slurm.conf(5)) corral does not render, e.g. "
                    "`SchedulerParameters: bf_continue`; one word each (true/false: YES/NO); written last, sorted; "
                    "checked against the target Slurm release's own slurm.conf(5) where corral has read it "
                    "(22.05, 24.11, 26.05)")

    @model_validator(mode="after")
    def _rest_keys_not_in_extra(self) -> SlurmSpec:
        """slurm.rest writes slurm.conf's AuthAltTypes and AuthAltParameters (render/slurm_rest.py)."""
        clash = sorted(k for k in self.extra if k.lower() in ("authalttypes", "authaltparameters"))
        if self.rest is not None and clash:
            raise ValueError(f"slurm.extra.{clash[0]}: slurm.rest sets it (the JWT key); remove it from slurm.extra")
        return self
