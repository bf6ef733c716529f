"""NVIDIA driver choices from the spec (pure): which package, open or proprietary kernel modules,
the apt pin that holds the version. Used by deploy/nvidia_driver.py and workflows/driver_rollout.py."""

from __future__ import annotations

from corral.errors import UsageError
from corral.facts.slurm import upstream_version
from corral.spec.cluster import Cluster, Node
from corral.spec.gpus import gpu_model
from corral.spec.models import DriverSpec
from corral.spec.nvidia_archive import UNPINNED, branches, describe, package_names
from corral.spec.support_matrix import dcgm_unavailable

PIN = "/etc/apt/preferences.d/corral-nvidia-driver"
BLACKLIST = "/etc/modprobe.d/corral-blacklist-nouveau.conf"
BLACKLIST_TEXT = "# Managed by corral: the NVIDIA driver needs nouveau out of the way\nblacklist nouveau\noptions nouveau modeset=0\n"
OPEN_FROM_CC = (7, 5)



KEYRING_DEB = "cuda-keyring_1.1-1_all.deb"
CUDA_KEY_FINGERPRINT = "EB693B3035CD5710E231E123A4B469963BF863CC"  # NVIDIA's CUDA repository key (3bf863cc)
# each suite's signing key where it is not that one: debian13 is signed by a newer key (8793F200), per NVIDIA's
# cuda-repo-management README ("Active pubkeys") and its keyring package's entry point, .../debian13/x86_64/
SUITE_KEYS = {"debian13": "02182E60104FCDC26EAE1B8597A5D4CB8793F200"}


def fingerprint_of(cluster, suite: str = "debian12") -> str:
    """The key `suite` of the CUDA repository must be signed with: the spec's (nvidia.driver.repo_fingerprint, a
    site's re-signed mirror) or NVIDIA's for that suite."""
    driver = cluster.spec.nvidia.driver
    own = SUITE_KEYS.get(suite, CUDA_KEY_FINGERPRINT)
    return (driver.repo_fingerprint or own).upper() if driver else own


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
    return driver_packages(driver, node, os_id, os_version)[0]


def driver_packages(driver: DriverSpec, node: Node, os_id: str, os_version: str) -> list[str]:
    """The packages held at the driver's version, the driver's own first (spec `package` overrides): one
    metapackage from NVIDIA's repository or Ubuntu; from Debian's archive, the kernel module (DKMS), nvidia-smi,
    the CUDA driver library and NVML of the branch (spec/nvidia_archive.py)."""
    if driver.package:
        return [driver.package]
    branch, flavour = branch_of(driver), kernel_modules(driver, node)
    os_id = os_id.lower()
    if os_id == "ubuntu" and driver.source == "distribution":
        return [f"nvidia-driver-{branch}-server" + ("-open" if flavour == "open" else "")]
    if os_id in ("ubuntu", "debian") and driver.source == "cuda":
        return [f"nvidia-open-{branch}" if flavour == "open" else f"cuda-drivers-{branch}"]
    major = os_version.split(".")[0]
    found = branches(major).get(branch) if os_id == "debian" and driver.source == "distribution" else None
    if found is not None:
        # Debian builds no open modules for some branches (Tesla 535): auto falls back; a request for them
        # is refused by spec check (spec/rules_driver.py)
        return package_names(found, flavour == "open" and found.open_modules)
    raise UsageError(f"corral cannot install the NVIDIA driver {branch} on {os_id} {os_version} from {driver.source!r}",
                    value=f"{os_id} {os_version}",
                    fix=f"Debian {major}'s archive carries the branches {describe(major)}" if branches(major) else
                    "use nvidia.driver.source: cuda (Debian 12/13, Ubuntu 22.04/24.04) or distribution (Ubuntu, "
                    "Debian 13)")


def unpinned_packages(driver: DriverSpec, os_id: str) -> list[str]:
    """Installed with the driver at the archive's own version (Debian's nvidia-persistenced)."""
    return list(UNPINNED) if driver.source == "distribution" and os_id.lower() == "debian" and not driver.package \
        else []


def branch_of(driver: DriverSpec) -> str:
    """The driver's branch: the spec's `branch`, else its version's first part (550.163.01 -> 550)."""
    return driver.branch or (driver.version or "").split(".")[0]


def fabricmanager_package(driver: DriverSpec) -> str:
    """NVIDIA Fabric Manager of the driver's branch (NVSwitch systems); held at the driver's version
    by the same pin (nvidia-*)."""
    return f"nvidia-fabricmanager-{branch_of(driver)}"


def pin_text(package: str, version: str, overridden: bool, also: tuple[str, ...] = ()) -> str:
    """apt preferences that hold every driver package at `version` (an upgrade never moves it); `also`: more
    names of the set whose names the patterns miss (Debian's libcuda1)."""
    names = package if overridden else " ".join(dict.fromkeys(
        (package, *also, "nvidia-*", "libnvidia-*", "cuda-drivers*")))
    return (f"# Managed by corral: the NVIDIA driver stays at {version} until the spec changes it\n"
            f"Package: {names}\nPin: version {version}-*\nPin-Priority: 1001\n")


def pin_for(packages: list[str], version: str, overridden: bool) -> str:
    """The pin of a driver's package set (driver_packages): its names no pattern covers are named."""
    covered = ("nvidia-", "libnvidia-", "cuda-drivers")
    return pin_text(packages[0], version, overridden, tuple(p for p in packages[1:] if not p.startswith(covered)))


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
    missing = dcgm_unavailable(node.os)  # left on by default there; set explicitly, spec check refuses it
    if missing:
        return missing
    return None
