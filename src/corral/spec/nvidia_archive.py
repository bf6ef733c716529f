"""The NVIDIA driver a Debian release's own archive carries (`nvidia.driver.source: distribution` on Debian):
which branches, under which package names, for a compute node without a display.

Read from Debian 13's non-free, contrib (the open modules) and non-free-firmware sections with apt in a
private configuration against the archive's signed index (2026-12-08): the current driver, 550.163.01
(`nvidia-driver`, its kernel modules `nvidia-kernel-dkms` and `nvidia-open-kernel-dkms`), and the Tesla 535
branch, 535.274.02 (`nvidia-tesla-535-*`, proprietary kernel modules only: Debian builds no open ones for it). A compute node
needs the kernel module (built by DKMS), `nvidia-smi`, the CUDA driver library and NVML; not the `nvidia-driver`
metapackage, which brings X11, GLX and Vulkan (120 packages against 46). nvidia-persistenced is its own source
package (550.163.01-1 for both branches) and is installed beside the branch, not held at its version.

Debian 12's non-free section is not here: it is neither carried by corral's virtual repository nor run, so
spec check refuses it (the support matrix, spec/support_matrix.py) rather than let an apply find out. Pure data: no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Branch:
    """One driver branch of a Debian archive: its package infix ('' for the current driver), its newest
    version there, and whether Debian builds NVIDIA's open kernel modules for it."""

    infix: str
    version: str
    open_modules: bool


# Debian major -> driver branch -> how the archive packages it
ARCHIVE: dict[str, dict[str, Branch]] = {
    "13": {"550": Branch("", "550.163.01", True), "535": Branch("tesla-535", "535.274.02", False)},
}
# Debian major -> the CUDA toolkit its archive carries (nvidia.cuda_toolkit.source: distribution): version, package.
# Debian 13's nvidia-cuda-toolkit 12.4.131~12.4.1-2 brings 96 packages, 1.9 GB (resolved against trixie with apt)
TOOLKIT: dict[str, tuple[str, str]] = {"13": ("12.4", "nvidia-cuda-toolkit")}
TOOLKIT_HOME = "/usr/lib/cuda"  # Debian's CUDA_HOME: bin, include, lib64 and nvvm linked there; nvcc is in /usr/bin
UNPINNED = ("nvidia-persistenced",)  # installed with every branch, at the archive's own version
HEADERS = "linux-headers-amd64"  # DKMS builds the module against the running kernel's headers (real servers)


def branches(debian_major: str) -> dict[str, Branch]:
    return ARCHIVE.get(debian_major, {})


def package_names(branch: Branch, open_modules: bool) -> list[str]:
    """The branch's packages a compute node needs, the kernel module's first (the one whose version is the
    driver's): module (DKMS), nvidia-smi, the CUDA driver library, NVML."""
    n = f"nvidia-{branch.infix}-" if branch.infix else "nvidia-"
    lib = f"libnvidia-{branch.infix}-" if branch.infix else "libnvidia-"
    kernel = f"{n}{'open-' if open_modules else ''}kernel-dkms"
    return [kernel, f"{n}smi", f"{lib}cuda1" if branch.infix else "libcuda1", f"{lib}ml1"]


def describe(debian_major: str) -> str:
    """'550 (550.163.01), 535 (Tesla, 535.274.02)' for an error's fix."""
    found = branches(debian_major)
    return ", ".join(f"{b} ({'Tesla, ' if x.infix.startswith('tesla') else ''}{x.version})" for b, x in found.items())
