"""Apptainer on login and compute nodes, rendered (pure; docs/components/apptainer.md). Declared as data
(`resources`, render/resources.py): the one generic deploy applies it, its package goes to the virtual
repository and the bundle, all from this list.

Debian's `apptainer` alone, never `apptainer-suid`: containers start in unprivileged user namespaces (the
users' subordinate ids, uidmap's newuidmap/newgidmap, which podman uses too), with no setuid helper of its
own. It needs no configuration of corral's: Debian's /etc/apptainer/apptainer.conf and nvliblist.conf as
packaged. `docker://` pulls from the site registry trust corral's CA through the node's trust store (the
"ca trust" component; apptainer reads /etc/ssl/certs), and `--nv` binds the driver's libraries and
nvidia-smi, which nvliblist.conf names, with the node's /dev. Where the package comes from is
spec/apptainer_source.py (Debian unstable's, for Debian 13 nodes) or the site's mirror (source: mirror).
"""

from __future__ import annotations

from corral.spec.apptainer_source import APPTAINER, PACKAGE, corral_set, upstream_version
from corral.spec.cluster import Cluster

TREE_NAME = "apptainer"  # its module: apptainer/<version> in corral's module tree (deploy/software.py)


def module_version(cluster: Cluster, os_name: str) -> str:
    """The module's version on a node of `os_name`: corral's package's upstream version, or `mirror` for the
    site's package (whose version corral does not know before it is installed)."""
    src = corral_set(cluster, os_name)
    return upstream_version(src.version) if src is not None else "mirror"


def resources(cluster: Cluster, node) -> list:
    """What apptainer's component installs on a node (components/slurm.py gates it: login and compute nodes)."""
    from corral.render import resources as r
    return [r.Packages((PACKAGE,), "apptainer (unprivileged, no setuid helper)", "images.apptainer")]


def module_versions() -> list[str]:
    """Every version its module may have on any node (a stale one is removed)."""
    return [*(upstream_version(s.version) for s in APPTAINER.values()), "mirror"]
