"""EasyBuild's configuration file (pure): /etc/xdg/easybuild.d/corral.cfg on every login and compute node.

EasyBuild reads it as an INI file (Python's configparser, with %-interpolation): every value is a typed
absolute path (spec/types.py AbsPath) that spec/rules_software.py also keeps free of `%` and `:` (robot-paths
is a `:`-separated list), so each value stays one value. The install tree and sources are on the shared
software root; the build directories on the build node's local disk (BUILD_DIR, the manager's, 0700);
modules are Lua, for Lmod, in <prefix>/modules/all, which render/lmod.py puts on every user's MODULEPATH.
"""

from __future__ import annotations

import posixpath
from typing import TYPE_CHECKING

from corral.spec import easybuild as eb

if TYPE_CHECKING:
    from corral.spec.cluster import Cluster

CONFIG = "/etc/xdg/easybuild.d/corral.cfg"  # EasyBuild reads $XDG_CONFIG_DIRS/easybuild.d, /etc/xdg by default
BUILD_PATH = posixpath.join(eb.BUILD_DIR, "build")


def config(cluster: Cluster) -> str:
    p = eb.prefix(cluster)
    return "\n".join([
        f"# Managed by corral from {cluster.path.name} (software.easybuild) — do not edit",
        "# builds run as Slurm jobs of the software manager: `corral software build EASYCONFIG`",
        "[config]",
        f"prefix = {p}",
        f"installpath = {p}",
        f"installpath-modules = {posixpath.join(p, 'modules')}",
        f"sourcepath = {posixpath.join(p, 'sources')}",
        f"repositorypath = {posixpath.join(p, 'ebfiles_repo')}",
        f"buildpath = {BUILD_PATH}",
        f"robot-paths = {':'.join(eb.robot_paths(cluster))}",
        "modules-tool = Lmod",
        "module-syntax = Lua",
        "umask = 022",
        ""])
