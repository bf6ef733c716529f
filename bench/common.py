"""Shared helpers for benchmarks: throwaway virtual clusters on a bench-only subnet, medians, tables."""

from __future__ import annotations

import ipaddress
import statistics
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

from corral.spec.loader import load
from corral.virtual.cluster import VirtualCluster
from corral.virtual.defaults import default_spec

BENCH_SUBNET = ipaddress.IPv4Network("10.213.88.0/24")


@contextmanager
def bench_cluster(compute: int, *, name: str = "bench", up: bool = True):
    """A virtual cluster with `compute` compute nodes (+1 controller); always torn down."""
    with tempfile.TemporaryDirectory(prefix="corral-bench-", ignore_cleanup_errors=True) as d:
        path = Path(d) / "cluster.yaml"
        path.write_text(default_spec(name, compute, 4, "h100", BENCH_SUBNET, "corralbench0", 18088))
        vc = VirtualCluster(load(path))
        try:
            if up:
                vc.up()
            yield vc
        finally:
            vc.down()


def timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def median(xs: list[float]) -> float:
    return statistics.median(xs)


def table(title: str, header: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(str(c)) for c in col) for col in zip(header, *rows)]
    line = lambda cells: "| " + " | ".join(str(c).ljust(w) for c, w in zip(cells, widths)) + " |"  # noqa: E731
    sep = "|" + "|".join("-" * (w + 2) for w in widths) + "|"
    return "\n".join([f"### {title}", line(header), sep, *map(line, rows)])
