"""Where EasyBuild lives and who builds with it, from the spec (pure): its install tree on the software root,
its venv, the node that builds the venv and makes the tree (spec/shared.maker), the build node, the software
manager and the robot path. render/easybuild.py, deploy/easybuild.py and workflows/software_build.py read
these; spec/rules_software.py checks the spec against them."""

from __future__ import annotations

import posixpath
from typing import TYPE_CHECKING

from corral.spec.releases import release
from corral.spec.shared import maker

if TYPE_CHECKING:
    from corral.spec.cluster import Cluster, Node
    from corral.spec.models_users import User

TREE_DIRS = ("software", "modules", "modules/all", "sources", "easyconfigs", "ebfiles_repo", "builds")
BUILD_DIR = "/var/lib/corral-easybuild"  # on the build node's local disk: the manager's, 0700


def prefix(cluster: Cluster) -> str:
    eb = cluster.spec.software.easybuild
    return eb.prefix or posixpath.join(cluster.spec.software.root, "easybuild")


def modules_tree(cluster: Cluster) -> str:
    """The module tree EasyBuild writes (installpath-modules + its default `all` view): on MODULEPATH."""
    return posixpath.join(prefix(cluster), "modules", "all")


def easyconfigs(cluster: Cluster) -> str:
    """corral's own robot path: where `corral software build` puts each easyconfig it builds."""
    return posixpath.join(prefix(cluster), "easyconfigs")


def robot_paths(cluster: Cluster) -> list[str]:
    return [easyconfigs(cluster), *cluster.spec.software.easybuild.robot_paths]


def venv(cluster: Cluster, lock: str) -> str:
    """EasyBuild's venv as every node sees it (on the shared software root), named by its list."""
    return posixpath.join(cluster.spec.software.root, ".corral", "easybuild", lock)


def venv_builder(cluster: Cluster, lock: str) -> tuple[Node, str] | None:
    return maker(cluster, venv(cluster, lock))


def tree_maker(cluster: Cluster) -> tuple[Node, str] | None:
    """(node, path there) where the install tree is made once and handed to the software manager."""
    return maker(cluster, prefix(cluster))


def build_node(cluster: Cluster) -> Node | None:
    """software.easybuild.build_node, else the first compute node (None: no such node)."""
    eb = cluster.spec.software.easybuild
    if eb.build_node:
        return next((n for n in cluster.nodes if n.name == eb.build_node), None)
    return next((n for n in cluster.nodes if "compute" in n.roles), None)


def manager(cluster: Cluster) -> User | None:
    """The software manager's users: entry (None: not one of users:)."""
    name = cluster.spec.software.easybuild.user
    return next((u for u in cluster.spec.users if u.name == name), None)


def owner(cluster: Cluster) -> tuple[str, str]:
    """(user, group) names of the software manager (users: accounts exist on every node)."""
    user = manager(cluster)
    return user.name, user.group or user.name


def python_of(cluster: Cluster) -> str:
    """The CPython minor of the build node's release: the venv's, and the list it is built from."""
    return release(build_node(cluster).os).python
