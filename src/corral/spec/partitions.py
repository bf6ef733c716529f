"""Which compute nodes each Slurm partition holds (pure): the spec's partitions, or the one corral makes."""

from __future__ import annotations

from typing import TYPE_CHECKING

from corral.spec.hosts import expand_names

if TYPE_CHECKING:
    from corral.spec.cluster import Cluster, Node


def partition_specs(cluster: Cluster, compute: list[Node] | None = None) -> list[tuple]:
    """(name, node names, default, MaxTime, PriorityTier, QOS, extra) of each partition: the spec's (ALL:
    every compute node; the first is the default unless one says so), or one `gpu` (`batch` without GPUs)
    partition of every compute node."""
    compute = cluster.with_role("compute") if compute is None else compute
    by_name = {n.name: n for n in compute}
    parts = list(cluster.spec.slurm.partitions)
    if not parts:
        name = "gpu" if any(n.gpus for n in compute) else "batch"
        return [(name, [n.name for n in compute], True, "INFINITE", 1, None, {})]
    default = next((p.name for p in parts if p.default), parts[0].name)
    specs = []
    for p in parts:
        names = list(by_name) if p.nodes == "ALL" else expand_names(p.nodes)
        specs.append((p.name, [x for x in names if x in by_name], p.name == default, p.max_time,
                      p.priority_tier, p.qos, p.extra))
    return specs
