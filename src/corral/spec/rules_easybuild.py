"""Cross-field checks of `software.easybuild` (pure, before any SSH): a build node that is a compute node,
a software manager who is one of users: with a Slurm account (the build jobs are theirs; never root), an
install tree under the software root, and paths EasyBuild's configuration file keeps as one value each
(render/easybuild.py: no `%`, which its parser interpolates, and no `:`, which separates robot paths)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from corral.errors import Problem
from corral.spec import easybuild as eb
from corral.spec.shared import under

if TYPE_CHECKING:
    from corral.spec.cluster import Cluster

Where = Callable[..., str]
AT = ("software", "easybuild")


def _path(where: Where, key: tuple, value: str) -> list[Problem]:
    if "%" in value or ":" in value:
        return [Problem(where(key), "EasyBuild's configuration cannot hold `%` or `:` in a path (its parser "
                        "interpolates %, robot-paths are separated by :)", value, "choose a path without them")]
    return []


def check_easybuild(cluster: Cluster, where: Where) -> list[Problem]:
    sw = cluster.spec.software
    if sw is None or sw.easybuild is None:
        return []
    e, problems = sw.easybuild, []
    node = eb.build_node(cluster)
    if node is None or "compute" not in node.roles:
        at = ("build_node",) if e.build_node else ()
        problems.append(Problem(where((*AT, *at)), "builds run as Slurm jobs on a compute node: "
                                + ("not a compute node of the spec" if e.build_node else "the spec has none"),
                                e.build_node or "(unset)", "name a compute node (nodes[] with role compute)"))
    user = eb.manager(cluster)
    if user is None:
        problems.append(Problem(where((*AT, "user")), "the software manager must be one of users: (an account on "
                                "every node that submits the build jobs and owns the install tree)", e.user,
                                "add it to users: with a Slurm account, or name an existing user"))
    elif not user.accounts:
        problems.append(Problem(where((*AT, "user")), "the software manager has no Slurm account: it submits the "
                                "build jobs", e.user, "give its users: entry accounts: [...]"))
    problems += _path(where, (*AT, "prefix") if e.prefix else ("software", "root"), eb.prefix(cluster))
    if e.prefix and (not under(e.prefix, sw.root) or e.prefix == sw.root):
        problems.append(Problem(where((*AT, "prefix")), f"EasyBuild's tree must be a directory under the software "
                                f"root ({sw.root}), which every login and compute node mounts", e.prefix,
                                f"e.g. {sw.root.rstrip('/')}/easybuild, or leave it unset"))
    seen: set[str] = set()
    for i, path in enumerate(e.robot_paths):
        problems += _path(where, (*AT, "robot_paths", i), path)
        if path in seen or path == eb.easyconfigs(cluster):
            problems.append(Problem(where((*AT, "robot_paths", i)), "named twice (corral's own is always first)",
                                    path, "remove it"))
        seen.add(path)
    return problems
