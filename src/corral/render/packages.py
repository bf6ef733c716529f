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
    return {name: sorted(reasons) for name, reasons in sorted(why.items())}


def packages_for(cluster: Cluster) -> list[str]:
    return list(package_reasons(cluster))
