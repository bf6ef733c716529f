"""`images.apptainer`: refused where its package has no source (pure, before any SSH).

corral's apptainer (source: corral, spec/apptainer_source.py) is Debian unstable's package for Debian 13
nodes, served by corral's own repositories only: the virtual cluster's, and a bundle's. So it is refused
on a node group of another release (Debian 12's libraries are too old for it), and on a real cluster that
installs from the nodes' own apt sources (packages.source: mirror), whose Debian 13 archive has no apptainer.
`source: mirror` is the site's word that its mirror carries one: nothing is refused then.
spec/rules_images.py calls check_apptainer."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from corral.errors import Problem
from corral.spec.apptainer_source import APPTAINER
from corral.spec.releases import RELEASES

if TYPE_CHECKING:
    from corral.spec.cluster import Cluster

Where = Callable[..., str]
AT = ("images", "apptainer")
SITE = "or set images.apptainer.source: mirror where the nodes' apt sources (a site mirror) carry an apptainer package"


def check_apptainer(cluster: Cluster, where: Where) -> list[Problem]:
    a = cluster.spec.images.apptainer
    if a is None or a.source != "corral":
        return []
    groups = dict.fromkeys(n.group for n in cluster.nodes if "login" in n.roles or "compute" in n.roles)
    for gi in groups:
        group = cluster.spec.nodes[gi]
        src = APPTAINER.get(group.os)
        if src is None and group.os in RELEASES:
            ours = " and ".join(f"Debian {s.suite}'s {s.version} for {n}" for n, s in APPTAINER.items())
            return [Problem(where(AT), f"no apptainer source for {group.os} nodes (nodes[{gi}]: {group.names}): "
                                       f"corral's is {ours} nodes only (its libraries are newer than {group.os}'s)",
                            "source: corral", f"run these nodes on {' or '.join(APPTAINER)}, {SITE}")]
        if src is not None and cluster.spec.virtual is None and cluster.spec.packages.source == "mirror":
            return [Problem(where(AT), f"no apptainer for {group.os} nodes (nodes[{gi}]: {group.names}) from the "
                                       f"nodes' own apt sources: Debian {RELEASES[group.os].suite} has no apptainer "
                                       f"package, and corral's (Debian {src.suite}'s {src.version}) reaches real "
                                       "nodes in a bundle only", "source: corral",
                            "build a bundle that carries it (`corral bundle build`) and install from it "
                            f"(packages.source: bundle), {SITE}")]
    return []
