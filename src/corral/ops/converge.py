"""Plan or apply every component of the cluster (what `corral plan/apply/up` run)."""

from __future__ import annotations

from corral.deploy import components
from corral.deploy.context import gather
from corral.engine import run
from corral.engine.results import RunResult
from corral.spec.cluster import Cluster


def converge(cluster: Cluster, mode: str = "apply", *, limit: list[str] | None = None, on_event=None,
             command: str | None = None) -> RunResult:
    return run(cluster, components(cluster), mode=mode, limit=limit, on_event=on_event,
               command=command or mode, prepare=gather(cluster))
