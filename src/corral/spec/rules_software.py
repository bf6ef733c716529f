"""Cross-field checks of `software:` and `slurm.clean_jobs` (pure, before any SSH).

software: the root is on a spec mount (storage.mounts) that every login and compute node mounts (each of
them reads the same module tree), a scheduler with login nodes (Slurm), site trees named once.
clean_jobs: Slurm's job_container/tmpfs exists up to 25.05 (render/job_container.py: 25.11 replaced it
with namespace/tmpfs); its BasePath on each node's local disk, never /tmp or /dev/shm themselves."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from corral.errors import Problem
from corral.spec import schedulers
from corral.spec.releases import RELEASES, release
from corral.spec.shared import enclosing_mount, mount_nodes, under
from corral.spec.slurm_releases import has_job_container

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


def slurm_versions(cluster: Cluster) -> list[tuple[int, int]]:
    """The Slurm majors the spec's nodes run: slurm.version, else each group's release's own."""
    text = [cluster.spec.slurm.version] if cluster.spec.slurm.version else [
        release(g.os).slurm for g in cluster.spec.nodes if g.os in RELEASES]
    return sorted({(int(t.split(".")[0]), int(t.split(".")[1])) for t in text})


def check_clean_jobs(cluster: Cluster, where: Where) -> list[Problem]:
    slurm = cluster.spec.slurm
    if not slurm.clean_jobs:
        return []
    problems = []
    gone = [v for v in slurm_versions(cluster) if not has_job_container(v)]
    if gone:
        at = "version" if slurm.version else "clean_jobs"
        problems.append(Problem(where(("slurm", at)), f"Slurm {gone[0][0]}.{gone[0][1]:02d} has no job_container/"
                                "tmpfs (25.11 replaced it with namespace/tmpfs, which corral does not render "
                                "yet): slurm.clean_jobs cannot be kept", slurm.version or True,
                                "pin slurm.version to 25.05 or earlier, or set slurm.clean_jobs: false"))
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
