"""Cross-field checks of `workbench.jupyterhub` and users' `password` (pure but for the site certificate's
files, read where the spec names them; before any SSH).

The hub runs on a login node of a Slurm cluster, from a venv on the shared software root (`software:`),
built on the node that writes that root, with the Python of the hub node's release (all three the same
Python: the venv's interpreter is each node's own python3); the form offers partitions and GPU types
the spec has; a site certificate's key is not readable by others; a directory names its users by login groups
(the hub's sudo rule lists whom it acts for). A password is for logins through PAM
on login nodes: a cluster without one has nowhere to use it."""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from typing import TYPE_CHECKING

from corral.errors import Problem
from corral.spec.releases import release
from corral.spec.partitions import partition_specs
from corral.spec.shared import enclosing_mount
from corral.workbench_wheels import PYTHONS, has_lock
from corral.spec.workbench import gpu_types, hub_node, offered as offered_partitions, venv_builder

if TYPE_CHECKING:
    from corral.spec.cluster import Cluster

Where = Callable[..., str]
HUB = ("workbench", "jupyterhub")


def _tls(cluster: Cluster, where: Where) -> list[Problem]:
    tls = cluster.spec.workbench.jupyterhub.tls
    if tls is None:
        return []
    out = []
    for key, path in (("cert", tls.cert), ("key", tls.key)):
        try:
            st = os.stat(path)
        except OSError as exc:
            out.append(Problem(where((*HUB, "tls", key)), f"cannot read it: {exc.strerror}", path,
                               "put the site's PEM file there, or unset workbench.jupyterhub.tls"))
            continue
        if key == "key" and st.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
            out.append(Problem(where((*HUB, "tls", "key")), f"the private key is readable by others (mode "
                               f"{stat.S_IMODE(st.st_mode):04o})", path, f"chmod 600 {path}"))
    return out


def check_workbench(cluster: Cluster, where: Where) -> list[Problem]:
    problems = _passwords(cluster, where)
    jh = cluster.spec.workbench.jupyterhub
    if jh is None:
        return problems
    if cluster.spec.scheduler != "slurm":
        return problems + [Problem(where(HUB), "the notebook hub starts servers as Slurm jobs",
                                   cluster.spec.scheduler, "remove workbench.jupyterhub or use scheduler: slurm")]
    if cluster.spec.software is None:
        return problems + [Problem(where(HUB), "the hub's venv lives on the shared software root, and "
                                   "software: is not set", None, "add `software: {}` (and a storage mount for /sw)")]
    hub = hub_node(cluster)
    if hub is None or "login" not in hub.roles:
        what = f"{jh.node} is not a login node of the spec" if jh.node else "the spec has no login node"
        return problems + [Problem(where((*HUB, "node") if jh.node else HUB), what, jh.node,
                                   "name a node with the login role (or add one)")]
    if enclosing_mount(cluster, cluster.spec.software.root) is None:
        return problems  # rules_software says where the root should be
    python = release(hub.os).python
    if not has_lock(python):
        problems.append(Problem(where(HUB), f"corral pins no notebook wheels for Python {python} ({hub.name} runs "
                                f"{hub.os})", hub.os, f"run the hub on a release with Python "
                                f"{' or '.join(PYTHONS)} (debian-12, debian-13)"))
    built = venv_builder(cluster, "x")
    others = [n for n in cluster.nodes if ("compute" in n.roles or n is built[0]) and release(n.os).python != python]
    if others:
        problems.append(Problem(where(HUB), f"{others[0].name} runs Python {release(others[0].os).python}, the hub "
                                f"node {hub.name} Python {python}: the one venv on the software root serves both",
                                others[0].os, "run the hub, the compute nodes and the NFS server on one release"))
    names = {p[0] for p in partition_specs(cluster)}
    for i, p in enumerate(jh.partitions):
        if p not in names:
            problems.append(Problem(where((*HUB, "partitions", i)), "not a partition of the cluster", p,
                                    f"one of: {', '.join(sorted(names))}"))
    offered = offered_partitions(cluster)
    kinds = _gpu_types(cluster)
    for i, t in enumerate(jh.gpu_types):
        if t not in kinds:
            problems.append(Problem(where((*HUB, "gpu_types", i)), "no node of the form's partitions has GPUs "
                                    "of this type", t, f"one of: {', '.join(sorted(kinds)) or '(no GPUs)'}"))
    if not offered:
        problems.append(Problem(where((*HUB, "partitions")), "the form would offer no partition", jh.partitions,
                                "name partitions of slurm.partitions, or leave the list empty for all"))
    if jh.default_time > jh.max_time:
        problems.append(Problem(where((*HUB, "default_time")), f"longer than max_time ({jh.max_time} s)",
                                jh.default_time, "make it at most max_time"))
    return problems + _tls(cluster, where) + _directory(cluster, where)


def _directory(cluster: Cluster, where: Where) -> list[Problem]:
    """The hub acts for users through a sudo rule that lists them (render/jupyterhub.py runas): the directory's
    users must be named by group, or the rule could only say "everyone but root", system accounts included."""
    ldap = cluster.spec.identity.ldap
    if ldap is None or ldap.login_groups:
        return []
    return [Problem(where(("identity", "ldap")), "the notebook hub starts servers as a user only through a sudo rule "
                    "that names its users, and without login_groups every directory user may log in: they cannot "
                    "be named", None, "set identity.ldap.login_groups to the directory groups whose members use "
                    "the cluster")]


def _gpu_types(cluster: Cluster) -> set[str]:
    jh = cluster.spec.workbench.jupyterhub
    return {t for p in partition_specs(cluster) if not jh.partitions or p[0] in jh.partitions
            for t in gpu_types(cluster, p[1])}


def _passwords(cluster: Cluster, where: Where) -> list[Problem]:
    if not any(n for n in cluster.nodes if "login" in n.roles):
        return [Problem(where(("users", i, "password")), "a password is for logins on login nodes, and the spec "
                        "has none", True, "remove password, or add a login node")
                for i, u in enumerate(cluster.spec.users) if u.password]
    return []
