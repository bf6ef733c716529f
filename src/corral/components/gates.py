"""Where each Slurm component applies, declared once: the node's roles and the spec's switches. A
component's declaration names its gate (`applies`); its deploy does nothing on a node outside it and
`corral render` writes none of its files there (workflows/render_slurm.py reads the declaration).
Skips with a reason (a virtual cluster's NAS, a login node that is a compute node too) stay in the
deploys and renderers, where the plan and the notes say them."""

from __future__ import annotations


def ldap(cluster, node) -> bool:
    return cluster.spec.identity.ldap is not None


def nfs_server(cluster, node) -> bool:
    return "nfs" in node.roles and bool(cluster.spec.storage.exports)


def compute(cluster, node) -> bool:
    return "compute" in node.roles


def health(cluster, node) -> bool:
    return "compute" in node.roles and cluster.spec.health.enabled


def mig(cluster, node) -> bool:
    return "compute" in node.roles and node.gpus is not None and node.gpus.mig is not None


def accounting(cluster, node) -> bool:
    return "accounting" in node.roles


def power(cluster, node) -> bool:
    return "controller" in node.roles and cluster.spec.power.enabled


def controller(cluster, node) -> bool:
    return "controller" in node.roles


def login_only(cluster, node) -> bool:
    """A login node that is not a controller (a controller has slurm.conf already)."""
    return "login" in node.roles and "controller" not in node.roles
