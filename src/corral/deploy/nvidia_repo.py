"""NVIDIA's CUDA network repository on Debian/Ubuntu nodes (dcgm-exporter today; the driver stack
later): the cuda-keyring package from `<repo_url>/<distro>/<arch>/`, then an apt refresh."""

from __future__ import annotations

from pyinfra import host
from pyinfra.api import StringCommand, operation
from pyinfra.facts.server import Arch, LinuxDistribution

from corral.deploy.notes import annotate
from corral.deploy.nodestate import Want, snapshot

KEYRING_DEB = "cuda-keyring_1.1-1_all.deb"
SUPPORTED = {("debian", "12"): "debian12", ("ubuntu", "22.04"): "ubuntu2204", ("ubuntu", "24.04"): "ubuntu2404"}
ARCHES = {"x86_64": "x86_64", "amd64": "x86_64", "aarch64": "sbsa", "arm64": "sbsa"}


def repo_path(distro_id: str, version: str, arch: str) -> str:
    """('ubuntu', '22.04', 'x86_64') -> 'ubuntu2204/x86_64'; a clear error for anything else."""
    key = (distro_id.lower(), version if distro_id.lower() == "ubuntu" else version.split(".")[0])
    if key not in SUPPORTED or arch not in ARCHES:
        supported = ", ".join(f"{d} {v}" for d, v in SUPPORTED)
        raise ValueError(f"NVIDIA's CUDA repository is set up by corral for {supported} on x86_64/arm64 "
                         f"only; this node runs {distro_id} {version} on {arch}")
    return f"{SUPPORTED[key]}/{ARCHES[arch]}"


@operation()
def cuda_repository(repo_url: str, want: Want):
    """Install cuda-keyring (NVIDIA's signing key and apt source) unless it is installed."""
    if "cuda-keyring" in snapshot(want).packages:
        host.noop("NVIDIA CUDA repository configured (cuda-keyring installed)")
        return
    dist = host.get_fact(LinuxDistribution)
    meta = dist.get("release_meta") or {}
    path = repo_path(meta.get("ID", dist.get("name") or "?"), meta.get("VERSION_ID", str(dist.get("major"))),
                     host.get_fact(Arch))
    url = f"{repo_url.rstrip('/')}/{path}/{KEYRING_DEB}"
    annotate(disruption="none", diff=f"apt source: {repo_url.rstrip('/')}/{path}/ (signed by cuda-keyring)\n")
    tmp = f"/tmp/corral-{KEYRING_DEB}"
    yield StringCommand("curl", "-fsSL", "--retry", "3", "-o", tmp, url)
    yield StringCommand("dpkg", "-i", tmp)
    yield StringCommand("rm", "-f", tmp)
    yield StringCommand("env", "DEBIAN_FRONTEND=noninteractive", "apt-get", "update", "-q")
