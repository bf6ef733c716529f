"""Typed cluster spec (cluster.yaml). Pydantic models only; loading and cross-checks live beside.

Every model forbids unknown keys so a typo is an error (with the closest valid key suggested), and
every field has a description: docs/spec.md is generated from them (spec/reference.py). The sections
live in models_slurm.py, models_monitoring.py, models_nvidia.py, models_acceptance.py, containers.py and
mig.py; this module re-exports them.
"""

from __future__ import annotations

import ipaddress
from typing import Literal

from pydantic import Field

from corral.spec.containers import EnrootSpec, PyxisSpec
from corral.spec.mig import MigGroupSpec, MigPartedSpec
from corral.spec.models_kubernetes import KubernetesSpec
from corral.spec.models_base import GPU_MODEL, LOCAL_PATH, Strict  # noqa: F401 - re-exported (reference.py)
from corral.spec.models_monitoring import (AlertReceiver, AlertsSpec, DcgmExporterSpec, GrafanaSpec,
                                           MonitoringSpec, SmtpSpec)
from corral.spec.models_nvidia import (ContainerToolkitSpec, CudaToolkitSpec, DcgmSpec, DriverSpec,
                                       NvidiaSpec, RolloutSpec)
from corral.spec.models_software import SoftwareSpec
from corral.spec.models_workbench import WorkbenchSpec
from corral.spec.models_audit import AuditSpec
from corral.spec.models_slurm import (HOSTLIST, NAME, QOS, SLURM_TIME, Account, FairShare, Partition,
                                      SlurmSpec)
from corral.spec.models_storage import Mount, NfsExport, StorageSpec
from corral.spec.models_acceptance import AcceptanceSpec, BurnSpec, NcclSpec
from corral.spec.models_backup import BackupSpec
from corral.spec.models_images import ImagesSpec
from corral.spec.models_power import PowerSpec
from corral.spec.models_packages import PackagesSpec, ProxySpec
from corral.spec.models_reports import ReportsSpec
from corral.spec.models_rollout import RolloutPolicy
from corral.spec.models_topology import FabricSpec, TopologySpec
from corral.spec.models_users import Group, IdentitySpec, User
from corral.spec.types import AbsPath, UnitName, UnixUser

__all__ = ["SLURM_ROLES", "K8S_ROLES", "Role", "NAME", "SLURM_TIME", "HOSTLIST", "GpuSpec", "GpuOverride",
           "SSHSpec", "NodeOverride", "NodeGroup", "Partition", "QOS", "Account", "FairShare", "SlurmSpec",
           "HealthSpec", "AlertReceiver", "SmtpSpec", "AlertsSpec", "GrafanaSpec", "DcgmExporterSpec",
           "MonitoringSpec", "DriverSpec", "RolloutSpec", "DcgmSpec", "CudaToolkitSpec", "ContainerToolkitSpec",
           "NvidiaSpec", "EnrootSpec", "PyxisSpec", "MigGroupSpec", "MigPartedSpec", "VirtualSpec", "ClusterSpec",
           "StorageSpec", "NfsExport", "Mount", "User", "Group", "IdentitySpec", "AcceptanceSpec", "BurnSpec", "NcclSpec",
           "ReportsSpec", "PowerSpec", "ImagesSpec"]

SLURM_ROLES = ("controller", "compute", "login", "accounting", "monitoring", "nfs")
K8S_ROLES = ("control-plane", "worker", "monitoring", "nfs")
Role = Literal["controller", "compute", "login", "accounting", "monitoring", "nfs",
               "control-plane", "worker"]



class GpuSpec(Strict):
    """GPUs of one node: `model` is the Slurm GRES type (lowercase), e.g. h100."""

    model: str = Field(pattern=GPU_MODEL, max_length=32,
                       description="GPU model, lowercase (h100, a100, ...): the GRES type in slurm.conf Gres= "
                                   "and gres.conf Type=, and a node Feature")
    count: int = Field(ge=0, le=64, description="GPUs per node: Gres=gpu:MODEL:COUNT in slurm.conf")
    memory_gib: int | None = Field(default=None, ge=1, le=4096,
                                   description="memory of one GPU, GiB (checked by doctor against nvidia-smi)")
    nvlink: bool = Field(default=False, description="GPUs joined by NVLink: the node Feature nvlink")
    mig: list[MigGroupSpec] | None = Field(default=None, description="MIG layout of these GPUs; unset: corral "
                                                                     "leaves MIG alone")
    model_unknown_ok: bool = Field(default=False,
                                   description="allow a `model` corral does not know (spec/gpus.py): without it an "
                                               "unknown model is refused as a likely typo; with it, a warning "
                                               "(no generation Feature, no burn floor, no MIG profiles)")


class GpuOverride(Strict):
    """Changes to the group's `gpus` for one node: only the keys given."""

    model: str | None = Field(default=None, pattern=GPU_MODEL, max_length=32, description="this node's GPU model")
    count: int | None = Field(default=None, ge=0, le=64, description="this node's GPU count (0: no GPUs)")
    memory_gib: int | None = Field(default=None, ge=1, le=4096, description="memory of one GPU, GiB")
    nvlink: bool | None = Field(default=None, description="GPUs joined by NVLink")
    mig: list[MigGroupSpec] | None = Field(default=None, description="this node's MIG layout")
    model_unknown_ok: bool | None = Field(default=None, description="allow this node's `model` though corral "
                                                                    "does not know it (as the group's gpus)")


class SSHSpec(Strict):
    """How corral reaches every node."""

    user: UnixUser = Field(default="root", description="the user corral logs in as; not root: every command "
                                                       "runs through `sudo -n` (passwordless sudo)")
    key: str | None = Field(default=None, pattern=LOCAL_PATH,
                            description="private key file (relative paths: relative to the spec file); "
                                        "unset: ssh-agent")
    port: int = Field(default=22, ge=1, le=65535, description="SSH port of every node")
    jump_host: str | None = Field(default=None, pattern=r"^([a-z_][a-z0-9_-]*@)?[A-Za-z0-9][A-Za-z0-9.:-]*(:\d+)?$",
                                  description="[user@]host[:port] to reach the nodes through (SSH ProxyJump)")


class NodeOverride(Strict):
    """Settings of one node of a group that differ from the group's."""

    address: ipaddress.IPv4Address | ipaddress.IPv6Address | None = Field(
        default=None, description="this node's address")
    roles: list[Role] | None = Field(default=None, min_length=1, description="this node's roles")
    gpus: GpuOverride | None = Field(default=None, description="changes to the group's gpus")
    memory_mb: int | None = Field(default=None, ge=64, description="this node's RealMemory in slurm.conf, MB")


class NodeGroup(Strict):
    """A set of alike nodes: `names: gpu[01-16]`, `addresses: 10.0.0.[11-26]`."""

    names: str = Field(min_length=1, pattern=HOSTLIST,
                       description="node names, a Slurm hostlist (gpu[01-16]): NodeName in slurm.conf")
    addresses: list[str] | str = Field(description="one address per name (NodeAddr; no DNS needed): a list, "
                                                   "a hostlist 10.0.0.[11-26] or a range 10.0.0.11-26")
    roles: list[Role] = Field(min_length=1, description="what runs on these nodes (see Roles)")
    gpus: GpuSpec | None = Field(default=None, description="GPUs of each node; unset: none")
    memory_mb: int | None = Field(default=None, ge=64, description="node RealMemory in slurm.conf, MB; unset: "
                                                                   "from node facts (`slurmd -C`)")
    overrides: dict[str, NodeOverride] = Field(default_factory=dict,
                                               description="per node, by name: what differs from the group")
    os: str = Field(default="debian-12",
                    description="the OS release these nodes run (spec/releases.py): `debian-12` (bookworm, Slurm "
                                "22.05) or `debian-13` (trixie, Slurm 24.11; `slurm.version: \"26.05\"` gets Debian "
                                "unstable's 26.05 packages on the virtual cluster, docs/components/slurm.md); the "
                                "virtual cluster builds this release's base image and package repository for them "
                                "(Debian only). `ubuntu-22.04` (Slurm 21.08) and `ubuntu-24.04` (Slurm 23.11) deploy "
                                "through the same apt steps but are not run on a live node by corral's tests (a "
                                "warning); `rocky-9` (EPEL's Slurm 22.05) is refused: corral has no dnf step "
                                "(docs/releases.md)")


class HealthSpec(Strict):
    """Node health checks (corral-health as Slurm's HealthCheckProgram on compute nodes)."""

    enabled: bool = Field(default=True, description="HealthCheckProgram=corral-health in slurm.conf")
    interval_s: int = Field(default=300, ge=5, le=86400, description="HealthCheckInterval in slurm.conf, seconds")
    timeout_s: int = Field(default=30, ge=2, le=600, description="hard bound of one corral-health run, seconds")
    max_gpu_temp_c: int = Field(default=85, ge=30, le=120,
                                description="a hotter GPU fails the check (also the GpuTemperatureHigh alert), °C")
    mounts: list[AbsPath] = Field(default_factory=lambda: ["/"], description="paths that must be readable and writable")
    services: list[UnitName] = Field(default_factory=list,
                                     description="systemd units that must be active, besides munge and slurmd")
    min_free_mb: dict[AbsPath, int] = Field(
        default_factory=lambda: {"/": 512, "/tmp": 256, "/var/lib/slurm": 256},
        description="free space each path needs, MB")


class VirtualSpec(Strict):
    """Present only in specs written by `corral virtual up`: how the local virtual cluster is built."""

    bridge: str = Field(default="corral0", pattern=r"^[a-z][a-z0-9]{0,14}$",
                        description="the host's bridge the virtual nodes attach to")
    subnet: ipaddress.IPv4Network = Field(default=ipaddress.IPv4Network("10.213.0.0/24"),
                                          description="the nodes' network; the host is .1, nodes from .10")
    repo_port: int = Field(default=8080, ge=1024, le=65535,
                           description="port of the host's package repository for the nodes")
    node_memory_mb: int = Field(default=2048, ge=256, description="RealMemory declared for virtual nodes, MB")


class ClusterSpec(Strict):
    """cluster.yaml: the whole cluster."""

    name: str = Field(pattern=NAME, description="the cluster's name: ClusterName in slurm.conf")
    scheduler: Literal["slurm", "kubernetes"] = Field(default="slurm", description="the workload manager")
    ssh: SSHSpec = Field(default=SSHSpec(), description="how corral reaches the nodes")
    nodes: list[NodeGroup] = Field(min_length=1, description="node groups")
    slurm: SlurmSpec = Field(default=SlurmSpec(), description="Slurm settings (scheduler: slurm)")
    kubernetes: KubernetesSpec = Field(default=KubernetesSpec(), description="Kubernetes settings (scheduler: "
                                                                             "kubernetes; docs/components/kubernetes.md)")
    health: HealthSpec = Field(default=HealthSpec(), description="node health checks")
    monitoring: MonitoringSpec = Field(default=MonitoringSpec(), description="monitoring and alerts")
    nvidia: NvidiaSpec = Field(default=NvidiaSpec(), description="NVIDIA software")
    storage: StorageSpec = Field(default=StorageSpec(), description="NFS exports and shared mounts")
    packages: PackagesSpec = Field(default=PackagesSpec(), description="where packages come from (a mirror or a "
                                                                       "signed bundle: docs/airgap.md), OS package "
                                                                       "upgrades and holds (rolled out under `rollout:`)")
    proxy: ProxySpec | None = Field(default=None, description="the site's outbound HTTP(S) proxy; unset: none")
    rollout: RolloutPolicy = Field(default=RolloutPolicy(), description="how changes that drain or reboot "
                                                                        "nodes go through them (canary, batches)")
    backup: BackupSpec = Field(default=BackupSpec(), description="backups of controller state, accounting DB "
                                                                 "and corral's state dir")
    reports: ReportsSpec = Field(default=ReportsSpec(), description="chargeback prices for `corral report "
                                                                   "usage`")
    power: PowerSpec = Field(default=PowerSpec(), description="power saving: idle compute nodes powered off "
                                                           "through their BMCs (Redfish), on again for a job")
    topology: TopologySpec | None = Field(default=None, description="the network between compute nodes, for "
                                                                   "topology-aware scheduling (topology.conf); unset: none")
    fabric: FabricSpec = Field(default=FabricSpec(), description="NCCL/UCX settings from each compute node's "
                                                                 "fabric facts, exported into every job")
    acceptance: AcceptanceSpec = Field(default=AcceptanceSpec(), description="GPU acceptance checks of `corral "
                                                                             "validate` (real GPUs only)")
    software: SoftwareSpec | None = Field(default=None, description="Lmod, a module tree on shared storage and the "
                                                                     "modules corral writes (login and compute "
                                                                     "nodes); unset: none")
    images: ImagesSpec = Field(default=ImagesSpec(), description="container images: a registry on the cluster "
                                                                 "(site registry, pull-through caches) and podman "
                                                                 "pulling through it (docs/components/images.md)")
    workbench: WorkbenchSpec = Field(default=WorkbenchSpec(), description="interactive work: notebooks as Slurm "
                                                                           "jobs (docs/components/notebooks.md)")
    users: list[User] = Field(default_factory=list, description="local user accounts, the same on every node")
    audit: AuditSpec = Field(default=AuditSpec(), description="what the site runs on its nodes besides corral, for "
                                                              "`corral audit`")
    groups: list[Group] = Field(default_factory=list, description="local groups, the same on every node")
    identity: IdentitySpec = Field(default=IdentitySpec(), description="homes and SSH access to compute nodes")
    state_dir: str = Field(default=".corral", pattern=LOCAL_PATH,
                           description="secrets, pinned host keys, journal (relative to the spec file)")
    allow_http: bool = Field(default=False, description="permit http:// download URLs (only behind a trusted "
                                                        "proxy or mirror); warned about on every run")
    virtual: VirtualSpec | None = Field(default=None, description="written by `corral virtual up`")
