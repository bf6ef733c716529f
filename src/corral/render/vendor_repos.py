"""The vendors' apt repositories the spec's nodes install from (pure): NVIDIA's CUDA repository (the
driver, DCGM, dcgm-exporter, the CUDA toolkit, NCCL), NVIDIA's container toolkit repository, Grafana's.
For each: where it is (the apt source line), where its signing key comes from, the key's pinned
fingerprint (the vendor's, or the spec's for a site's re-signed mirror), what the spec takes from it
and why, and the apt preferences the nodes hold it with. The deploys set the repositories up on the
nodes (deploy/nvidia_repo.py, nvidia_tools.py, grafana.py); a bundle carries their packages instead
(bundle/vendor.py)."""

from __future__ import annotations

from dataclasses import dataclass

from corral.render.nvidia import CUDA_KEY_FINGERPRINT, KEYRING_DEB, fingerprint_of
from corral.spec.cluster import Cluster

# NVIDIA CORPORATION (Open Source Projects) <cudatools@nvidia.com>, rsa4096 2017-09-28 (libnvidia-container/gpgkey)
CTK_KEY_FINGERPRINT = "C95B321B61E88C1809C4F759DDCAE044F796ECB0"
# Grafana Labs' apt key since 2023-08-24 (apt.grafana.com/gpg.key)
GRAFANA_KEY_FINGERPRINT = "B53AE77BADB630A683046005963FA27710458545"
CTK_PACKAGES = ("nvidia-container-toolkit", "nvidia-container-toolkit-base", "libnvidia-container-tools",
                "libnvidia-container1")
ARCH = "amd64"  # a bundle's architecture (bundle/downloads.py)


@dataclass(frozen=True)
class VendorRepo:
    name: str                       # "NVIDIA CUDA repository"
    spec_key: str                   # the spec key naming its URL
    source: str                     # after `deb [signed-by=KEYRING] `: "URL /" (flat) or "URL suite component"
    key_url: str                    # the signing key: an (armored) key file, or cuda-keyring's .deb
    fingerprint: str                # the one primary key it must hold
    packages: dict[str, list[str]]  # apt request ("pkg" or "pkg=version") -> why
    pin: str = ""                   # apt preferences the nodes hold these packages with

    @property
    def keyring_deb(self) -> bool:
        return self.key_url.endswith(".deb")


def _gpu_compute(cluster: Cluster) -> list:
    return [n for n in cluster.nodes if n.gpu_count and "compute" in n.roles]


def ctk_fingerprint(cluster: Cluster) -> str:
    c = cluster.spec.nvidia.container_toolkit
    return (c.repo_fingerprint or CTK_KEY_FINGERPRINT).upper() if c else CTK_KEY_FINGERPRINT


def grafana_fingerprint(cluster: Cluster) -> str:
    return (cluster.spec.monitoring.grafana.key_fingerprint or GRAFANA_KEY_FINGERPRINT).upper()


def ctk_pin(version: str | None) -> str:
    if version is None:
        return "# Managed by corral: the NVIDIA Container Toolkit is not pinned (version unset)\n"
    return f"# Managed by corral\nPackage: {' '.join(CTK_PACKAGES)}\nPin: version {version}\nPin-Priority: 1001\n"


def grafana_pin(version: str) -> str:
    return f"# Managed by corral\nPackage: grafana\nPin: version {version}\nPin-Priority: 1001\n"


def vendor_repos(cluster: Cluster) -> list[VendorRepo]:
    """The vendor repositories the spec's nodes take packages from (Debian 12, amd64: a bundle's target)."""
    from corral.render.nvidia import driver_nodes, driver_package, pin_text
    from corral.render.packages import cuda_repo_packages
    spec, out = cluster.spec, []
    cuda = cuda_repo_packages(cluster)
    if cuda:
        nv = spec.nvidia
        base = str(nv.driver.repo_url if nv.driver else spec.monitoring.dcgm_exporter.repo_url).rstrip("/")
        pin = ""
        if nv.driver is not None and nv.driver.source == "cuda" and driver_nodes(cluster):
            pin = pin_text(driver_package(nv.driver, driver_nodes(cluster)[0], "debian", "12"), nv.driver.version,
                           nv.driver.package is not None)
        out.append(VendorRepo("NVIDIA CUDA repository", "nvidia.driver.repo_url", f"{base}/debian12/x86_64/ /",
                              f"{base}/debian12/x86_64/{KEYRING_DEB}", fingerprint_of(cluster), cuda, pin))
    c = spec.nvidia.container_toolkit
    if c is not None and spec.virtual is None and _gpu_compute(cluster):
        base = str(c.repo_url).rstrip("/")
        request = f"nvidia-container-toolkit={c.version}" if c.version else "nvidia-container-toolkit"
        out.append(VendorRepo("NVIDIA container toolkit repository", "nvidia.container_toolkit.repo_url",
                              f"{base}/stable/deb/{ARCH} /", f"{base}/gpgkey", ctk_fingerprint(cluster),
                              {request: ["nvidia.container_toolkit"]}, ctk_pin(c.version) if c.version else ""))
    g = spec.monitoring.grafana
    if spec.monitoring.enabled and g.enabled and spec.virtual is None and cluster.with_role("monitoring"):
        out.append(VendorRepo("Grafana's repository", "monitoring.grafana.repo_url",
                              f"{str(g.repo_url).rstrip('/')} stable main", str(g.key_url), grafana_fingerprint(cluster),
                              {f"grafana={g.version}" if g.version else "grafana": ["monitoring.grafana"]},
                              grafana_pin(g.version) if g.version else ""))
    return out


def takers(cluster: Cluster, why: str) -> list:
    """The nodes that install a vendor package taken for `why` (the reason vendor_repos gives it)."""
    from corral.render.nvidia import driver_nodes
    if why.startswith("nvidia.driver"):
        return driver_nodes(cluster)
    if why == "nvidia.cuda_toolkit":
        return [n for n in cluster.nodes if "compute" in n.roles or "login" in n.roles]
    if why == "monitoring.grafana":
        return cluster.with_role("monitoring")
    return _gpu_compute(cluster)  # DCGM, dcgm-exporter, NCCL, the container toolkit


__all__ = ["CUDA_KEY_FINGERPRINT", "VendorRepo", "vendor_repos", "takers"]
