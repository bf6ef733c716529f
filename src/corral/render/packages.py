"""The distribution packages the spec's nodes install (pure): per role, and for the features the spec
turns on. The virtual cluster's repository (virtual/repo.py) and bundles (bundle/) are filled from it."""

from __future__ import annotations

from corral.spec.cluster import Cluster

# what each role needs on a node; deploys install from these (smoke: the engine smoke deploy)
ROLE_PACKAGES = {
    "*": ["memcached", "curl", "iputils-ping", "python3-apt", "prometheus-node-exporter"],
    "controller": ["slurmctld", "slurm-client", "munge", "python3-prometheus-client"],
    "compute": ["slurmd", "slurm-client", "munge", "libpmix2"],  # + libpam-slurm-adopt (packages_for)
    "login": ["slurm-client", "munge", "python3-venv"],  # users make their venvs there (job clients)
    "accounting": ["slurmdbd", "mariadb-server", "munge"],
    "monitoring": ["prometheus", "prometheus-alertmanager"],
}


def package_reasons(cluster: Cluster) -> dict[str, list[str]]:
    """Every package the spec's nodes install -> why (the roles or the spec key that need it)."""
    why: dict[str, set[str]] = {}

    def want(names, reason: str) -> None:
        for name in names:
            why.setdefault(name, set()).add(reason)
    want(ROLE_PACKAGES["*"], "every node")
    for node in cluster.nodes:
        for role in node.roles:
            want(ROLE_PACKAGES.get(role, []), f"role {role}")
    from corral.render.containers import BUILD_PACKAGES, FETCH_PACKAGES
    if cluster.spec.nvidia.enroot is not None or cluster.spec.nvidia.pyxis is not None:
        want(FETCH_PACKAGES, "nvidia.enroot/pyxis downloads")
    if cluster.spec.nvidia.pyxis is not None:  # built on the nodes against the installed Slurm
        want(BUILD_PACKAGES, "nvidia.pyxis (built on the nodes)")
    if cluster.spec.identity.pam_slurm_adopt and cluster.with_role("compute"):
        want(["libpam-slurm-adopt"], "identity.pam_slurm_adopt")
    t = cluster.spec.topology
    if t is not None and t.discover and not t.ibnetdiscover_file and cluster.with_role("compute"):
        want(["infiniband-diags"], "topology.discover")  # ibnetdiscover (deploy/fabric.py)
    if cluster.spec.virtual is None and cluster.with_role("compute"):  # installed where a node has RDMA ports
        want(["perftest"], "validate --fabric")
    if cluster.spec.identity.ldap is not None:
        from corral.render.sssd import PACKAGES as SSSD_PACKAGES
        want(SSSD_PACKAGES, "identity.ldap")
    acc = cluster.spec.acceptance
    if cluster.spec.virtual is None and _gpu_compute(cluster) and (acc.burn.enabled or acc.nccl.enabled):
        from corral.render.acceptance import BUILD_PACKAGES as ACCEPTANCE_BUILD, OPENMPI_PACKAGES
        want(ACCEPTANCE_BUILD, "acceptance (gpu-burn, nccl-tests built on the nodes)")
        if acc.nccl.enabled and acc.nccl.across_nodes:
            want(OPENMPI_PACKAGES, "acceptance.nccl.across_nodes")
    return {name: sorted(reasons) for name, reasons in sorted(why.items())}


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
    if nv.cuda_toolkit is not None and any(r in n.roles for n in cluster.nodes for r in ("compute", "login")):
        want("cuda-toolkit-" + nv.cuda_toolkit.version.replace(".", "-"), None, "nvidia.cuda_toolkit")
    if spec.virtual is None and gpus and spec.acceptance.nccl.enabled:
        from corral.render.acceptance import NCCL_PACKAGES
        for p in NCCL_PACKAGES:
            want(p, spec.acceptance.nccl.nccl_version, "acceptance.nccl")
    return {name: sorted(reasons) for name, reasons in sorted(why.items())}


def packages_for(cluster: Cluster) -> list[str]:
    return list(package_reasons(cluster))
