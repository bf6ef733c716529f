"""NVIDIA driver choices from the spec (pure): which package, open or proprietary kernel modules,
the apt pin that holds the version. Used by deploy/nvidia_driver.py and workflows/driver_rollout.py."""

from __future__ import annotations

from corral.errors import UsageError
from corral.facts.slurm import upstream_version
from corral.spec.cluster import Cluster, Node
from corral.spec.gpus import gpu_model
from corral.spec.models import DriverSpec

PIN = "/etc/apt/preferences.d/corral-nvidia-driver"
BLACKLIST = "/etc/modprobe.d/corral-blacklist-nouveau.conf"
BLACKLIST_TEXT = "# Managed by corral: the NVIDIA driver needs nouveau out of the way\nblacklist nouveau\noptions nouveau modeset=0\n"
OPEN_FROM_CC = (7, 5)  # NVIDIA's open kernel modules support Turing (7.5) and newer


KEYRING_DEB = "cuda-keyring_1.1-1_all.deb"
CUDA_KEY_FINGERPRINT = "EB693B3035CD5710E231E123A4B469963BF863CC"  # NVIDIA's CUDA repository key (3bf863cc)


def fingerprint_of(cluster) -> str:
    """The key the CUDA repository must be signed with: the spec's (nvidia.driver.repo_fingerprint) or NVIDIA's."""
    driver = cluster.spec.nvidia.driver
    return (driver.repo_fingerprint or CUDA_KEY_FINGERPRINT).upper() if driver else CUDA_KEY_FINGERPRINT

def kernel_modules(driver: DriverSpec, node: Node) -> str:
    """open | proprietary; auto: open for Turing and newer (from the spec's GPU model), else proprietary."""
    if driver.kernel_modules != "auto":
        return driver.kernel_modules
    known = gpu_model(node.gpus.model) if node.gpus else None
    if known is None:
        return "proprietary"
    cc = tuple(int(x) for x in known.compute_cap.split("."))
    return "open" if cc >= OPEN_FROM_CC else "proprietary"


def driver_package(driver: DriverSpec, node: Node, os_id: str, os_version: str) -> str:
    """The package that brings the whole driver for this OS (spec `package` overrides)."""
    if driver.package:
        return driver.package
    branch, flavour = driver.version.split(".")[0], kernel_modules(driver, node)
    os_id = os_id.lower()
    if os_id == "ubuntu" and driver.source == "distribution":
        return f"nvidia-driver-{branch}-server" + ("-open" if flavour == "open" else "")
    if os_id in ("ubuntu", "debian") and driver.source == "cuda":
        return f"nvidia-open-{branch}" if flavour == "open" else f"cuda-drivers-{branch}"
    raise UsageError(f"corral cannot install the NVIDIA driver on {os_id} {os_version} from {driver.source!r}",
                    value=f"{os_id} {os_version}",
                    fix="use nvidia.driver.source: cuda (Debian 12, Ubuntu 22.04/24.04) or "
                        "distribution (Ubuntu)")


def fabricmanager_package(driver: DriverSpec) -> str:
    """NVIDIA Fabric Manager of the driver's branch (NVSwitch systems); held at the driver's version
    by the same pin (nvidia-*)."""
    return f"nvidia-fabricmanager-{driver.version.split('.')[0]}"


def pin_text(package: str, version: str, overridden: bool) -> str:
    """apt preferences that hold every driver package at `version` (an upgrade never moves it)."""
    names = package if overridden else f"{package} nvidia-* libnvidia-* cuda-drivers*"
    return (f"# Managed by corral: the NVIDIA driver stays at {version} until the spec changes it\n"
            f"Package: {names}\nPin: version {version}-*\nPin-Priority: 1001\n")


def installed_matches(installed_deb_version: str | None, version: str) -> bool:
    return installed_deb_version is not None and upstream_version(installed_deb_version) == version


def driver_nodes(cluster: Cluster) -> list[Node]:
    """Nodes whose driver corral manages: compute nodes with GPUs, when nvidia.driver is set."""
    if cluster.spec.nvidia.driver is None:
        return []
    return [n for n in cluster.nodes if n.gpu_count and "compute" in n.roles]


def dcgm_skip_reason(cluster: Cluster, node: Node, enabled: bool, key: str) -> str | None:
    """Why DCGM or dcgm-exporter is not deployed on `node` (None: it is); `key` names the spec switch."""
    if not node.gpu_count or "compute" not in node.roles:
        return "no GPUs on this node"
    if not enabled:
        return f"{key} is false"
    if cluster.spec.virtual is not None:
        return "virtual cluster: its GPUs are emulated and DCGM cannot read them"
    return None
