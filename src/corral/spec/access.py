"""Where the cluster's users may log in (pure, from the spec): login nodes, and compute nodes while
pam_slurm_adopt lets a user in only with a job there. Every other node (controller, accounting, NFS
server, monitoring, a compute node without pam_slurm_adopt) is infrastructure: root, corral's SSH user
and the directory's identity.ldap.admin_groups only. deploy/users.py puts the spec users' SSH keys on
user nodes only; render/sssd.py gives SSSD an access provider per node from it."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from corral.spec.cluster import Cluster, Node


def users_log_in(cluster: Cluster, node: Node) -> bool:
    """The cluster's users may log in on `node` (a job still needed on a compute node)."""
    return "login" in node.roles or ("compute" in node.roles and cluster.spec.identity.pam_slurm_adopt)
