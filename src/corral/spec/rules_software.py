"""Cross-field checks of `software:` and `slurm.clean_jobs` (pure, before any SSH).

software: the root is on a spec mount (storage.mounts) that every login and compute node mounts (each of
them reads the same module tree), a scheduler with login nodes (Slurm), site trees named once.
clean_jobs: its BasePath on each node's local disk, never /tmp or /dev/shm themselves (the plugin's key per
Slurm release: render/job_container.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from corral.errors import Problem
from corral.spec import schedulers
from corral.spec.shared import enclosing_mount, mount_nodes, under

if TYPE_CHECKING:
    from corral.spec.cluster import Cluster

Where = Callable[..., str]


def check_software(cluster: Cluster, where: Where) -> list[Problem]:
    sw = cluster.spec.software
    if sw is None:
        return []
    problems = []
    if "software" not in schedulers.of(cluster).carries:
        problems.append(Problem(where(("software",)), "software: serves Slurm's login and compute nodes",
                                cluster.spec.scheduler, "remove software: or use scheduler: slurm"))
        return problems
    mount = enclosing_mount(cluster, sw.root)
    users = [n for n in cluster.nodes if "login" in n.roles or "compute" in n.roles]
    if mount is None:
        problems.append(Problem(where(("software", "root")), "the software root is on no shared mount of "
                                "storage.mounts: every login and compute node must see the same tree", sw.root,
                                "add a storage.mounts entry at (or above) this path, or set software.root to a "
                                "path on one"))
    else:
        missing = [n.name for n in users if n not in mount_nodes(cluster, mount)]
        if missing:
            problems.append(Problem(where(("software", "root")), f"{', '.join(missing[:5])} do not mount "
                                    f"{mount.path}, where the software root is", sw.root,
                                    f"mount {mount.path} on every login and compute node (its roles: or nodes:)"))
    seen: set[str] = set()
    for i, tree in enumerate(sw.site_trees):
        if tree == "/":  # Lmod would walk the whole file system for modulefiles at every `module` command
            problems.append(Problem(where(("software", "site_trees", i)), "a module tree is a directory of "
                                    "modulefiles, not the whole file system", tree,
                                    "name the tree's own directory, e.g. /opt/site/modules"))
        elif tree in seen:
            problems.append(Problem(where(("software", "site_trees", i)), "named twice", tree, "remove one"))
        seen.add(tree)
    return problems


def check_clean_jobs(cluster: Cluster, where: Where) -> list[Problem]:
    slurm = cluster.spec.slurm
    if not slurm.clean_jobs:
        return []
    problems = []
    base = slurm.job_tmp_path
    if under(base, "/tmp") or under(base, "/dev/shm"):
        problems.append(Problem(where(("slurm", "job_tmp_path")), "a job's /tmp and /dev/shm are mounted over "
                                "themselves: Slurm refuses a BasePath there", base,
                                "choose a directory on the node's local disk, e.g. /var/lib/slurm/job_tmp"))
    elif (mount := enclosing_mount(cluster, base)) is not None:
        problems.append(Problem(where(("slurm", "job_tmp_path")), f"on the shared mount {mount.path}: every node "
                                "would keep its jobs' /tmp in one directory", base,
                                "choose a directory on the node's local disk, e.g. /var/lib/slurm/job_tmp"))
    return problems
