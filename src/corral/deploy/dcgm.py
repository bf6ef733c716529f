"""dcgm: NVIDIA DCGM on GPU compute nodes (real clusters): NVIDIA's CUDA repository, the package
(pinned when `nvidia.dcgm.version` is set) and its host engine service `nvidia-dcgm` running.
Skipped, with the reason in the plan, on the virtual cluster (DCGM cannot read emulated GPUs)."""

from __future__ import annotations

from pyinfra import host
from pyinfra.api import deploy

from corral.deploy import operations
from corral.deploy.nodestate import Want, register, register_for_run
from corral.deploy.nvidia_repo import cuda_repository
from corral.render.nvidia import dcgm_skip_reason
from corral.render.restart import dropin_path

SERVICE = "nvidia-dcgm"
PIN = "/etc/apt/preferences.d/corral-dcgm"
WANT = register(Want(paths=(PIN, dropin_path(SERVICE)), services=(SERVICE,), packages=("cuda-keyring",)))


def skip_reason(cluster, node) -> str | None:
    return dcgm_skip_reason(cluster, node, cluster.spec.nvidia.dcgm.enabled, "nvidia.dcgm.enabled")


def pin(package: str, version: str | None) -> str:
    if version is None:
        return f"# Managed by corral: {package} is not pinned (nvidia.dcgm.version unset)\n"
    return (f"# Managed by corral: an unrelated upgrade never moves DCGM\n"
            f"Package: {package} datacenter-gpu-manager*\nPin: version {version}\nPin-Priority: 1001\n")


@deploy("dcgm")
def dcgm() -> None:
    node, cluster = host.data.corral_node, host.data.corral_cluster
    reason = skip_reason(cluster, node)
    if reason == "no GPUs on this node":
        return
    if reason:
        operations.skip(name="DCGM", reason=reason)
        return
    d = cluster.spec.nvidia.dcgm
    register_for_run(Want(packages=(d.package,)))
    cuda_repository(name="NVIDIA CUDA repository", repo_url=cluster.spec.nvidia.driver.repo_url
                    if cluster.spec.nvidia.driver else cluster.spec.monitoring.dcgm_exporter.repo_url, want=WANT)
    operations.managed_file(name="DCGM version pin", path=PIN, want=WANT, content=pin(d.package, d.version))
    operations.packages(name="DCGM installed", names=[f"{d.package}={d.version}" if d.version else d.package], want=WANT)
    operations.restart_policy(name="DCGM host engine restarted by systemd when it dies", unit=SERVICE, want=WANT, started_next=True)
    operations.service(name="DCGM host engine running", unit=SERVICE, want=WANT, wait=f"systemctl is-active {SERVICE}")
