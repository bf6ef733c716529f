"""DCGM, declared as data (components/slurm.py): NVIDIA DCGM on GPU compute nodes (real clusters): NVIDIA's CUDA
repository, the package (pinned when `nvidia.dcgm.version` is set) and its host engine service `nvidia-dcgm` running.
Skipped, with the reason in the plan, on the virtual cluster (DCGM cannot read emulated GPUs)."""

from __future__ import annotations

from corral.render import resources as r
from corral.render.nvidia import dcgm_skip_reason
from corral.render.restart import POLICIES

SERVICE = "nvidia-dcgm"
PIN = "/etc/apt/preferences.d/corral-dcgm"


def skip_reason(cluster, node) -> str | None:
    return dcgm_skip_reason(cluster, node, cluster.spec.nvidia.dcgm.enabled, "nvidia.dcgm.enabled")


def pin(package: str, version: str | None) -> str:
    if version is None:
        return f"# Managed by corral: {package} is not pinned (nvidia.dcgm.version unset)\n"
    return (f"# Managed by corral: an unrelated upgrade never moves DCGM\n"
            f"Package: {package} datacenter-gpu-manager*\nPin: version {version}\nPin-Priority: 1001\n")


def resources(cluster, node) -> list:
    reason = skip_reason(cluster, node)
    if reason == "no GPUs on this node":
        return []
    if reason:
        return [r.Skip("DCGM", reason)]
    d, nv = cluster.spec.nvidia.dcgm, cluster.spec.nvidia
    return [
        r.Repository("NVIDIA CUDA repository", "cuda",
                     nv.driver.repo_url if nv.driver else cluster.spec.monitoring.dcgm_exporter.repo_url),
        r.File(PIN, pin(d.package, d.version), "DCGM version pin"),
        r.Packages((f"{d.package}={d.version}" if d.version else d.package,), "DCGM installed", "nvidia.dcgm",
                   vendor=True, together=False),
        r.Service(SERVICE, "DCGM host engine running", f"systemctl is-active {SERVICE}", policy=POLICIES[SERVICE],
                  policy_op="DCGM host engine restarted by systemd when it dies",
                  runs=r.Daemon(f"{SERVICE}.service", "root", "DCGM's host engine (GPU health and diagnostics)",
                                root=("nv-hostengine",), listens=(r.Listener(5555, "dcgmi and dcgm-exporter on this node",
                                                                             on="local"),))),
    ]
