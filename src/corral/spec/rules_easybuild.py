"""Cross-field checks of `software.easybuild` (pure, before any SSH): a build node that is a compute node,
a software manager who is one of users: with a Slurm account (the build jobs are theirs; never root), an
install tree under the software root, and paths EasyBuild's configuration file keeps as one value each
(render/easybuild.py: no `%`, which its parser interpolates, and no `:`, which separates robot paths)."""

from __future__ import annotations

import posixpath

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
    if node is not None and "compute" in node.roles:
        problems += _python(cluster, where, node)
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
    if e.prefix:
        for own in (posixpath.join(sw.root, ".corral"), posixpath.join(sw.root, "modulefiles")):
            if under(e.prefix, own) or under(own, e.prefix):
                problems.append(Problem(where((*AT, "prefix")), f"EasyBuild's tree goes to its manager, and {own} is "
                                        "corral's (the venvs the notebook hub runs, the site's module tree): neither "
                                        "may hold the other", e.prefix,
                                        f"e.g. {sw.root.rstrip('/')}/easybuild, or leave it unset"))
    seen: set[str] = set()
    for i, path in enumerate(e.robot_paths):
        problems += _path(where, (*AT, "robot_paths", i), path)
        if path in seen or path == eb.easyconfigs(cluster):
            problems.append(Problem(where((*AT, "robot_paths", i)), "named twice (corral's own is always first)",
                                    path, "remove it"))
        seen.add(path)
    return problems


def _python(cluster: Cluster, where: Where, node) -> list[Problem]:
    """The venv is built for the build node's Python, on the node that writes the software root: corral must
    pin EasyBuild's files for that Python, and that node must have it (rules_workbench.py does the same for
    the notebook hub's venv)."""
    from corral.spec.releases import release
    from corral.workbench_wheels import PYTHONS, has_lock
    python = release(node.os).python
    if not has_lock(python):
        return [Problem(where(AT), f"corral pins no EasyBuild files for Python {python} ({node.name} runs {node.os})",
                        node.os, f"build on a release with Python {' or '.join(PYTHONS)} (debian-12, debian-13)")]
    built = eb.venv_builder(cluster, "x")
    if built is not None and release(built[0].os).python != python:
        return [Problem(where(AT), f"{built[0].name}, which writes the software root, runs Python "
                        f"{release(built[0].os).python}, the build node {node.name} Python {python}: the venv is "
                        "built there for the build node", built[0].os,
                        "run the build node and the NFS server on one release")]
    return []
