"""Where the notebook hub lives and what its form offers, from the spec (pure): the hub's node, its venv on
the shared software root and the node that builds it, and the partitions with the GPU types their nodes
have. render/jupyterhub.py renders from these; spec/rules_workbench.py checks the spec against them."""

from __future__ import annotations

import posixpath
from typing import TYPE_CHECKING

from corral.spec.mig import spec_gres
from corral.spec.partitions import partition_specs
from corral.spec.shared import maker

if TYPE_CHECKING:
    from corral.spec.cluster import Cluster, Node


def hub_node(cluster: Cluster) -> Node | None:
    """workbench.jupyterhub.node, else the first login node (None: no hub, or no such node)."""
    jh = cluster.spec.workbench.jupyterhub
    if jh is None:
        return None
    if jh.node:
        return next((n for n in cluster.nodes if n.name == jh.node), None)
    return next((n for n in cluster.nodes if "login" in n.roles), None)


def venv(cluster: Cluster, lock: str) -> str:
    """The venv's path as every node sees it (on the shared software root), named by its wheel list."""
    return posixpath.join(cluster.spec.software.root, ".corral", "jupyterhub", lock)


def venv_builder(cluster: Cluster, lock: str) -> tuple[Node, str] | None:
    """(node, path there) where the venv is built once: spec/shared.maker of its path (the NFS server's
    exported directory, where root is not squashed)."""
    return maker(cluster, venv(cluster, lock))


def gpu_types(cluster: Cluster, names: list[str]) -> dict[str, int]:
    """GPU type (model or MIG profile) -> the most one of the nodes `names` has."""
    by_name = {n.name: n for n in cluster.nodes}
    out: dict[str, int] = {}
    for n in names:
        for kind, count in spec_gres(by_name[n].gpus).items():
            out[kind] = max(out.get(kind, 0), count)
    return out


def offered(cluster: Cluster) -> list[dict]:
    """The form's partitions: name, default, QOS, MaxTime, and GPU type -> the most one node of it has
    (workbench.jupyterhub.partitions and gpu_types narrow them; the first is the default if none is)."""
    jh = cluster.spec.workbench.jupyterhub
    out = []
    for name, names, default, max_time, _tier, qos, _extra in partition_specs(cluster):
        if jh.partitions and name not in jh.partitions:
            continue
        gpus = {k: v for k, v in gpu_types(cluster, names).items() if not jh.gpu_types or k in jh.gpu_types}
        out.append({"name": name, "default": default, "qos": qos, "max_time": max_time, "gpus": gpus})
    if out and not any(p["default"] for p in out):
        out[0]["default"] = True
    return out
