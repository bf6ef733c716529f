"""Typed cluster spec (cluster.yaml). Pydantic models only; loading and cross-checks live beside.

Every model forbids unknown keys so a typo is an error (with the closest valid key suggested).
"""

from __future__ import annotations

import ipaddress
from typing import Literal

from pydantic import Field, model_validator

from corral.spec.containers import EnrootSpec, PyxisSpec
from corral.spec.mig import MigGroupSpec, MigPartedSpec
from corral.spec.models_base import Strict
from corral.spec.types import (AbsPath, Email, HostPort, SlurmDuration, SlurmName,
                                UnitName, UnixUser, Url, UserName)

SLURM_ROLES = ("controller", "compute", "login", "accounting", "monitoring", "nfs")
K8S_ROLES = ("control-plane", "worker", "monitoring", "nfs")
Role = Literal["controller", "compute", "login", "accounting", "monitoring", "nfs",
               "control-plane", "worker"]
NAME = r"^[a-z0-9]([a-z0-9_-]{0,62})$"
SLURM_TIME = r"^(INFINITE|UNLIMITED|\d+|\d+:\d{2}(:\d{2})?|\d+-\d{1,2}(:\d{2}(:\d{2})?)?)$"
HOSTLIST = r"^[A-Za-z0-9._,\[\]-]+$"  # a Slurm hostlist expression: names, ranges, commas


class GpuSpec(Strict):
    """GPUs of one node: `model` is the Slurm GRES type (lowercase), e.g. h100."""

    model: str = Field(pattern=r"^[a-z0-9][a-z0-9_.-]*$", max_length=32)
    count: int = Field(ge=0, le=64)
    memory_gib: int | None = Field(default=None, ge=1, le=4096)
    nvlink: bool = False
    mig: list[MigGroupSpec] | None = None  # MIG layout (spec/mig.py); None: corral leaves MIG alone


class GpuOverride(Strict):
    model: str | None = Field(default=None, pattern=r"^[a-z0-9][a-z0-9_.-]*$", max_length=32)
    count: int | None = Field(default=None, ge=0, le=64)
    memory_gib: int | None = Field(default=None, ge=1, le=4096)
    nvlink: bool | None = None
    mig: list[MigGroupSpec] | None = None


class SSHSpec(Strict):
    user: UnixUser = "root"  # not root: every command runs through `sudo -n` (passwordless sudo)
    key: str | None = Field(default=None, pattern=r"^[^\x00-\x1f\x7f\"']+$")  # private key path; relative paths are relative to the spec file
    port: int = Field(default=22, ge=1, le=65535)
    jump_host: str | None = Field(default=None, pattern=r"^([a-z_][a-z0-9_-]*@)?[A-Za-z0-9][A-Za-z0-9.:-]*(:\d+)?$")


class NodeOverride(Strict):
    address: ipaddress.IPv4Address | ipaddress.IPv6Address | None = None
    roles: list[Role] | None = Field(default=None, min_length=1)
    gpus: GpuOverride | None = None
    memory_mb: int | None = Field(default=None, ge=64)


class NodeGroup(Strict):
    """A set of alike nodes: `names: gpu[01-16]`, `addresses: 10.0.0.[11-26]`."""

    names: str = Field(min_length=1, pattern=HOSTLIST)
    addresses: list[str] | str
    roles: list[Role] = Field(min_length=1)
    gpus: GpuSpec | None = None
    memory_mb: int | None = Field(default=None, ge=64)  # Slurm RealMemory; facts when absent
    overrides: dict[str, NodeOverride] = Field(default_factory=dict)


class Partition(Strict):
    name: str = Field(pattern=NAME)
    nodes: str = Field(default="ALL", pattern=HOSTLIST)  # hostlist of spec nodes, or ALL (every compute node)
    default: bool = False
    max_time: SlurmDuration = "INFINITE"
    qos: SlurmName | None = None
    priority_tier: int = Field(default=1, ge=0, le=65533)


class QOS(Strict):
    name: str = Field(pattern=NAME)
    priority: int = Field(default=0, ge=0)
    max_gpus_per_user: int | None = Field(default=None, ge=0)
    max_jobs_per_user: int | None = Field(default=None, ge=0)
    max_wall: SlurmDuration | None = None
    preempt: list[SlurmName] = Field(default_factory=list)
    preempt_mode: Literal["off", "cancel", "requeue", "suspend"] = "off"


class Account(Strict):
    name: str = Field(pattern=NAME)
    parent: SlurmName | None = None
    fairshare: int = Field(default=1, ge=0)
    users: list[UserName] = Field(default_factory=list)  # checked here, before any plan
    qos: list[SlurmName] = Field(default_factory=list)
    default_qos: SlurmName | None = None


class FairShare(Strict):
    enabled: bool = True
    weight_fairshare: int = Field(default=10000, ge=0)
    weight_age: int = Field(default=1000, ge=0)
    weight_qos: int = Field(default=5000, ge=0)
    weight_jobsize: int = Field(default=0, ge=0)
    weight_partition: int = Field(default=0, ge=0)
    decay_half_life: SlurmDuration = "7-0"  # PriorityDecayHalfLife


class SlurmSpec(Strict):
    partitions: list[Partition] = Field(default_factory=list)
    qos: list[QOS] = Field(default_factory=list)
    accounts: list[Account] = Field(default_factory=list)
    fairshare: FairShare = FairShare()
    enforce_limits: bool = True
    def_mem_per_gpu_mb: int | None = Field(default=None, ge=1)  # default: node memory / GPUs
    gres_autodetect: Literal["off", "nvml"] = "off"  # off: gres.conf lists /dev/nvidiaN from the spec


class HealthSpec(Strict):
    """Node health checks (corral-health as Slurm's HealthCheckProgram on compute nodes)."""

    enabled: bool = True
    interval_s: int = Field(default=300, ge=5, le=86400)   # Slurm HealthCheckInterval
    timeout_s: int = Field(default=30, ge=2, le=600)       # hard bound of one run
    max_gpu_temp_c: int = Field(default=85, ge=30, le=120)
    mounts: list[AbsPath] = Field(default_factory=lambda: ["/"])
    services: list[UnitName] = Field(default_factory=list)     # besides munge and slurmd
    min_free_mb: dict[AbsPath, int] = Field(
        default_factory=lambda: {"/": 512, "/tmp": 256, "/var/lib/slurm": 256})


class AlertReceiver(Strict):
    """Where Alertmanager sends alerts: a webhook URL or an e-mail address (needs alerts.smtp)."""

    name: str = Field(pattern=NAME)
    webhook: Url | None = None
    email: Email | None = None
    severities: list[Literal["critical", "warning"]] = Field(default_factory=lambda: ["critical", "warning"],
                                                             min_length=1)

    @model_validator(mode="after")
    def _one_target(self):
        if (self.webhook is None) == (self.email is None):
            raise ValueError("a receiver needs exactly one of `webhook` (URL) or `email` (address)")
        return self


class SmtpSpec(Strict):
    smarthost: HostPort  # host:port
    sender: Email
    require_tls: bool = True


class AlertsSpec(Strict):
    """Alert rules (Prometheus rule files) and Alertmanager routing."""

    receivers: list[AlertReceiver] = Field(default_factory=list)  # none: alerts are only shown in Alertmanager
    smtp: SmtpSpec | None = None
    for_s: int | None = Field(default=None, ge=0, le=86400)  # overrides every rule's `for:` (test profiles)
    filesystem_free_percent: int = Field(default=10, ge=1, le=90)
    clock_skew_s: float = Field(default=0.5, gt=0, le=60)
    idle_gpus_while_waiting_min: int = Field(default=15, ge=1, le=1440)


class GrafanaSpec(Strict):
    """Grafana from Grafana's package repository (not installable in the offline virtual cluster)."""

    enabled: bool = True
    port: int = Field(default=3000, ge=1, le=65535)
    repo_url: Url = "https://apt.grafana.com"
    key_url: Url = "https://apt.grafana.com/gpg.key"
    version: str | None = Field(default=None, pattern=r"^[0-9A-Za-z.+~:-]+$")  # apt version; none: newest


class DcgmExporterSpec(Strict):
    """NVIDIA dcgm-exporter on GPU nodes (from NVIDIA's CUDA repository; needs DCGM, so not on
    the virtual cluster's emulated GPUs)."""

    enabled: bool = True
    port: int = Field(default=9400, ge=1, le=65535)
    package: str = Field(default="datacenter-gpu-manager-exporter", pattern=r"^[a-z0-9][a-z0-9.+-]+$")
    version: str | None = Field(default=None, pattern=r"^[0-9A-Za-z.+~:-]+$")  # apt version, pinned
    binary: AbsPath = "/usr/bin/dcgm-exporter"
    repo_url: Url = "https://developer.download.nvidia.com/compute/cuda/repos"


class MonitoringSpec(Strict):
    """Prometheus + Alertmanager (+ Grafana) on the `monitoring` node, node-exporter on every node,
    corral's Slurm exporter on the controller, dcgm-exporter on GPU nodes."""

    enabled: bool = True
    prometheus_port: int = Field(default=9090, ge=1, le=65535)
    alertmanager_port: int = Field(default=9093, ge=1, le=65535)
    node_exporter_port: int = Field(default=9100, ge=1, le=65535)
    slurm_exporter_port: int = Field(default=9341, ge=1, le=65535)
    scrape_interval_s: int = Field(default=15, ge=1, le=3600)
    retention_days: int = Field(default=15, ge=1, le=3650)
    listen: Literal["node", "all"] = "node"  # node: bind the node's cluster address, not 0.0.0.0
    gpu_job_map_dir: AbsPath = "/run/corral/gpu-jobs"
    alerts: AlertsSpec = AlertsSpec()
    grafana: GrafanaSpec = GrafanaSpec()
    dcgm_exporter: DcgmExporterSpec = DcgmExporterSpec()


class DriverSpec(Strict):
    """The NVIDIA driver corral installs, pins and rolls out (docs/components/nvidia.md)."""

    version: str = Field(pattern=r"^\d+(\.\d+){1,3}$")        # upstream version, e.g. 550.127.05
    kernel_modules: Literal["auto", "open", "proprietary"] = "auto"  # auto: open for Turing and newer
    source: Literal["distribution", "cuda"] = "cuda"   # Ubuntu's server packages or NVIDIA's CUDA repository
    package: str | None = Field(default=None, pattern=r"^[a-z0-9][a-z0-9.+-]+$")  # override the package name
    repo_url: Url = "https://developer.download.nvidia.com/compute/cuda/repos"


class RolloutSpec(Strict):
    """How a change that needs a reboot goes through the nodes: drain, wait, install, reboot, verify, resume."""

    parallel: int = Field(default=1, ge=1, le=64)              # nodes at a time
    drain_timeout_s: int = Field(default=3600, ge=0, le=7 * 86400)  # wait for running jobs at most this long
    reboot_timeout_s: int = Field(default=900, ge=30, le=7200)  # until SSH answers with a new boot id


class DcgmSpec(Strict):
    """NVIDIA DCGM (host engine `nvidia-dcgm`) on GPU compute nodes, from NVIDIA's CUDA repository."""

    enabled: bool = True
    package: str = Field(default="datacenter-gpu-manager-4-cuda12", pattern=r"^[a-z0-9][a-z0-9.+-]+$")
    version: str | None = Field(default=None, pattern=r"^[0-9A-Za-z.+~:-]+$")  # apt version, pinned


class CudaToolkitSpec(Strict):
    """The CUDA toolkit (compilers, libraries) on compute and login nodes, once, from NVIDIA's repository."""

    version: str = Field(pattern=r"^\d+\.\d+$")   # e.g. 12.4 -> package cuda-toolkit-12-4


class ContainerToolkitSpec(Strict):
    """NVIDIA Container Toolkit on GPU compute nodes, its runtime configured for `engine`."""

    engine: Literal["docker", "containerd", "crio", "none"] = "none"  # none: toolkit only (enroot uses its hook)
    version: str | None = Field(default=None, pattern=r"^[0-9A-Za-z.+~:-]+$")  # apt version, pinned
    repo_url: Url = "https://nvidia.github.io/libnvidia-container"


class NvidiaSpec(Strict):
    driver: DriverSpec | None = None   # None: corral leaves the driver alone
    rollout: RolloutSpec = RolloutSpec()
    dcgm: DcgmSpec = DcgmSpec()
    cuda_toolkit: CudaToolkitSpec | None = None        # None: not installed
    container_toolkit: ContainerToolkitSpec | None = None  # None: not installed
    enroot: EnrootSpec | None = None     # None: not installed (compute nodes)
    pyxis: PyxisSpec | None = None       # None: not installed (every Slurm node; needs enroot)
    mig_parted: MigPartedSpec = MigPartedSpec()  # installed where a node group has gpus.mig


class VirtualSpec(Strict):
    """Present only in specs written by `corral virtual up`: how the local virtual cluster is built."""

    bridge: str = Field(default="corral0", pattern=r"^[a-z][a-z0-9]{0,14}$")
    subnet: ipaddress.IPv4Network = ipaddress.IPv4Network("10.213.0.0/24")
    repo_port: int = Field(default=8080, ge=1024, le=65535)
    node_memory_mb: int = Field(default=2048, ge=256)  # RealMemory declared for virtual nodes


class ClusterSpec(Strict):
    name: str = Field(pattern=NAME)
    scheduler: Literal["slurm", "kubernetes"] = "slurm"
    ssh: SSHSpec = SSHSpec()
    nodes: list[NodeGroup] = Field(min_length=1)
    slurm: SlurmSpec = SlurmSpec()
    health: HealthSpec = HealthSpec()
    monitoring: MonitoringSpec = MonitoringSpec()
    nvidia: NvidiaSpec = NvidiaSpec()
    state_dir: str = Field(default=".corral", pattern=r"^[^\x00-\x1f\x7f]+$")  # relative to the spec file
    allow_http: bool = False  # permit http:// download URLs (only behind a trusted proxy or mirror)
    virtual: VirtualSpec | None = None
