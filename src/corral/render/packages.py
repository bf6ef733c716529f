"""What the spec's nodes take from NVIDIA's CUDA repository (pure), as apt requests. The Debian packages
are declared with their components (components/), and derived from there."""

from __future__ import annotations

from corral.spec.cluster import Cluster


def _gpu_compute(cluster: Cluster) -> list:
    return [n for n in cluster.nodes if n.gpu_count and "compute" in n.roles]


def cuda_repo_packages(cluster: Cluster) -> dict[str, list[str]]:
    """What the spec's nodes install from NVIDIA's CUDA repository on Debian 12 -> why, as apt requests
    ("package" or "package=version" where the spec pins one): the driver (and its Fabric Manager, for
    NVSwitch systems), DCGM, dcgm-exporter, the CUDA toolkit, NCCL for the acceptance tests. The same
    choices as the deploys (render/nvidia.py, deploy/dcgm*.py, deploy/nvidia_tools.py, deploy/acceptance.py)."""
    from corral.render.nvidia import dcgm_skip_reason, driver_nodes, driver_package, fabricmanager_package
    spec, nv, why = cluster.spec, cluster.spec.nvidia, {}

    def want(name: str, version: str | None, reason: str) -> None:
        why.setdefault(f"{name}={version}" if version else name, set()).add(reason)
    driver = nv.driver
    if driver is not None and driver.source == "cuda":
        for node in driver_nodes(cluster):
            want(driver_package(driver, node, "debian", "12"), None, "nvidia.driver")
        if driver_nodes(cluster) and driver.package is None:
            want(fabricmanager_package(driver), None, "nvidia.driver (Fabric Manager, NVSwitch systems)")
    gpus = _gpu_compute(cluster)
    if gpus and dcgm_skip_reason(cluster, gpus[0], nv.dcgm.enabled, "nvidia.dcgm.enabled") is None:
        want(nv.dcgm.package, nv.dcgm.version, "nvidia.dcgm")
    m = spec.monitoring
    from corral.render.prometheus import dcgm_skip_reason as exporter_skip_reason
    if gpus and m.enabled and cluster.with_role("monitoring") and exporter_skip_reason(cluster, gpus[0]) is None:
        want(m.dcgm_exporter.package, m.dcgm_exporter.version, "monitoring.dcgm_exporter")
    if nv.cuda_toolkit is not None and nv.cuda_toolkit.source == "cuda" and any(
            r in n.roles for n in cluster.nodes for r in ("compute", "login")):
        want("cuda-toolkit-" + nv.cuda_toolkit.version.replace(".", "-"), None, "nvidia.cuda_toolkit")
    if spec.virtual is None and gpus and spec.acceptance.nccl.enabled:
        from corral.render.acceptance import NCCL_PACKAGES
        for p in NCCL_PACKAGES:
            want(p, spec.acceptance.nccl.nccl_version, "acceptance.nccl")
    return {name: sorted(reasons) for name, reasons in sorted(why.items())}
