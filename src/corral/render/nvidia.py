"""NVIDIA driver choices from the spec (pure): which package, open or proprietary kernel modules,
the apt pin that holds the version. Used by deploy/nvidia_driver.py and workflows/driver_rollout.py."""

from __future__ import annotations

from corral.errors import UsageError
from corral.facts.slurm import upstream_version
from corral.spec.cluster import Cluster, Node
from corral.spec.gpus import gpu_model
from corral.spec.models import DriverSpec

PIN = "/etc/apt/preferences.d/corral-nvidia-driver"
VERSIONLOCK = "/etc/dnf/plugins/versionlock.list"   # dnf's versionlock plugin (RHEL family): corral's block
LOCK_BEGIN, LOCK_END = "# BEGIN corral nvidia driver", "# END corral nvidia driver"
RHEL_IDS = ("rhel", "rocky", "almalinux", "centos")
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


def family(os_id: str) -> str:
    """'rhel' for RHEL, Rocky, AlmaLinux, CentOS (dnf); 'debian' otherwise (apt)."""
    return "rhel" if os_id.lower() in RHEL_IDS else "debian"


def driver_package(driver: DriverSpec, node: Node, os_id: str, os_version: str) -> str:
    """The package that brings the whole driver for this OS (spec `package` overrides)."""
    if driver.package:
        return driver.package
    branch, flavour = driver.version.split(".")[0], kernel_modules(driver, node)
    os_id = os_id.lower()
    if family(os_id) == "rhel":
        if os_version.split(".")[0] != "9" or driver.source != "cuda":
            raise UsageError(f"corral cannot install the NVIDIA driver on {os_id} {os_version} from {driver.source!r}",
                             value=f"{os_id} {os_version}",
                             fix="RHEL/Rocky/AlmaLinux 9 with nvidia.driver.source: cuda (NVIDIA's dnf module streams)")
        return "nvidia-driver"
    if os_id == "ubuntu" and driver.source == "distribution":
        return f"nvidia-driver-{branch}-server" + ("-open" if flavour == "open" else "")
    if os_id in ("ubuntu", "debian") and driver.source == "cuda":
        return f"nvidia-open-{branch}" if flavour == "open" else f"cuda-drivers-{branch}"
    raise UsageError(f"corral cannot install the NVIDIA driver on {os_id} {os_version} from {driver.source!r}",
                    value=f"{os_id} {os_version}",
                    fix="use nvidia.driver.source: cuda (Debian 12, Ubuntu 22.04/24.04, RHEL/Rocky 9) or "
                        "distribution (Ubuntu)")


def fabricmanager_package(driver: DriverSpec, os_family: str = "debian") -> str:
    """NVIDIA Fabric Manager of the driver's branch (NVSwitch systems); held at the driver's version
    by the same pin (nvidia-*). In NVIDIA's RHEL module streams it is nvidia-fabric-manager."""
    return "nvidia-fabric-manager" if os_family == "rhel" else f"nvidia-fabricmanager-{driver.version.split('.')[0]}"


def dnf_stream(driver: DriverSpec, node: Node) -> str:
    """NVIDIA's dnf module stream: nvidia-driver:<branch>-open or nvidia-driver:<branch>-dkms."""
    branch = driver.version.split(".")[0]
    return f"nvidia-driver:{branch}-" + ("open" if kernel_modules(driver, node) == "open" else "dkms")


def dnf_packages(driver: DriverSpec, node: Node, fabricmanager: bool) -> list[str]:
    """What the RHEL family installs from the stream: the driver, its CUDA user-space, the kernel
    module (open or proprietary, built by DKMS), Fabric Manager on NVSwitch systems."""
    kmod = "kmod-nvidia-open-dkms" if kernel_modules(driver, node) == "open" else "kmod-nvidia-latest-dkms"
    return ["nvidia-driver", "nvidia-driver-cuda", kmod] + (["nvidia-fabric-manager"] if fabricmanager else [])


def versionlock_block(version: str) -> str:
    """dnf versionlock entries holding every NVIDIA driver package at `version` (any epoch)."""
    return (f"{LOCK_BEGIN}: the NVIDIA driver stays at {version} until the spec changes it\n"
            f"nvidia-*-*:{version}-*\nkmod-nvidia-*-*:{version}-*\n{LOCK_END}\n")


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
