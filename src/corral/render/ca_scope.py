"""What the cluster CA may vouch for (site_ca name constraints), from the spec: every node's name and address and
the names the spec gives the notebook hub. The registry's and the hub's certificates name their node (and the
hub's `names`); a service moving to another node of the cluster stays within it."""

from __future__ import annotations


def ca_scope(cluster) -> list[str]:
    hub = cluster.spec.workbench.jupyterhub
    return [*(n.name for n in cluster.nodes), *(n.address for n in cluster.nodes), *(hub.names if hub else [])]
