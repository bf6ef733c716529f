"""Where Debian's apptainer comes from for each release's nodes (`images.apptainer`), as data.

apptainer is in neither Debian 13 (trixie) nor trixie-backports; Debian unstable carries it. Unstable's
1.4.5-2 binary package installs on trixie as it was built: what it depends on (libc6 >= 2.38, libseccomp2
>= 2.5.0, libsqlite3-0 >= 3.36.0, containernetworking-plugins, squashfs-tools, uidmap, ca-certificates) is
all in trixie (`apt-get -s` against the trixie base image's dpkg status, 2026-12-08), so nothing is relaxed
and the package is Debian's own, byte for byte. Debian 12's libc6 is 2.36: there is no row for it, and
spec check refuses apptainer there (spec/rules_apptainer.py). virtual/more_repos.py downloads the set
into a repository of its own beside the release's (the virtual cluster's, and a bundle's). Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING

# the shape of a set of another suite's binaries at one exact version (a newer Slurm's too)
from corral.spec.releases import SlurmFrom as FromSuite

if TYPE_CHECKING:
    from corral.spec.cluster import Cluster

PACKAGE = "apptainer"
SUBDIR = "apptainer"  # its repository beside the release's: repo-trixie/apptainer/, served at <repo url>apptainer/
APPTAINER: Mapping[str, FromSuite] = MappingProxyType({
    "debian-13": FromSuite(version="1.4.5-2", suite="unstable", packages=(PACKAGE,)),
})


def corral_set(cluster: Cluster, os_name: str) -> FromSuite | None:
    """corral's apptainer for `os_name`'s nodes, where the spec asks corral for it (source: corral) and the
    release has a row; None otherwise."""
    a = cluster.spec.images.apptainer
    if a is None or a.source != "corral":
        return None
    return APPTAINER.get(os_name)


def upstream_version(debian_version: str) -> str:
    """'1.4.5-2' -> '1.4.5' (no epoch, no Debian revision): the module's version."""
    return debian_version.split(":", 1)[-1].rsplit("-", 1)[0]
