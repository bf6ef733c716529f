"""Cross-field checks of `reports:` (pure, before any SSH): a price for a GPU type no node of the spec
has is an error (a misspelt model, `h100s`, would leave the real one unpriced without a word)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from corral.errors import Problem
from corral.spec.mig import layout

if TYPE_CHECKING:
    from corral.spec.cluster import Cluster

Where = Callable[..., str]


def gpu_types(cluster: Cluster) -> set[str]:
    """The GPU types Slurm accounts for on this spec's nodes: their GPU models and the MIG profiles
    of their layouts (each a typed GRES, `gres/gpu:1g.10gb` in sacct's AllocTRES)."""
    out = set()
    for n in cluster.nodes:
        if n.gpus:
            out.add(n.gpus.model)
            try:
                out |= {p for profiles in (layout(n.gpus) or {}).values() for p in profiles}
            except ValueError:  # a layout naming GPUs the node lacks: check_mig's problem to report
                pass
    return out


def check_reports(cluster: Cluster, where: Where) -> list[Problem]:
    known, problems = gpu_types(cluster), []
    for gpu_type in cluster.spec.reports.gpu_hour_cost:
        if gpu_type not in known:
            problems.append(Problem(where(("reports", "gpu_hour_cost", gpu_type)),
                                    "a GPU-hour price for a GPU type no node of the spec has", gpu_type,
                                    f"name a GPU model (or MIG profile) of the spec's nodes: "
                                    f"{', '.join(sorted(known)) or '(none)'}"))
    return problems
