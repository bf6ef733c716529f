"""Shared helpers for benchmarks: the default spec and throwaway virtual clusters on a bench-only
subnet, medians, goals, tables (the `corral` process timed from the shell: bench/from_shell.py)."""

from __future__ import annotations

import ipaddress
import statistics
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

from corral.spec.loader import load
from corral.virtual.cluster import VirtualCluster
from corral.virtual.defaults import EXAMPLE_USER, default_spec
from corral.virtual.keys import ensure_key, user_key_file

BENCH_SUBNET = ipaddress.IPv4Network("10.213.88.0/24")


def write_spec(directory: Path, compute: int = 2, name: str = "bench") -> Path:
    """The spec `corral up` writes (ctl, `compute` GPU nodes, login1, alice with her own key), on the
    bench subnet, bridge and repository port (a user's cluster on the default ones is left alone)."""
    key = ensure_key(user_key_file(directory / ".corral", EXAMPLE_USER), f"{EXAMPLE_USER}@{name}")
    path = directory / "cluster.yaml"
    path.write_text(default_spec(name, compute, 4, "h100", BENCH_SUBNET, "corralbench0", 18088, user_key=key))
    return path


@contextmanager
def bench_cluster(compute: int, *, name: str = "bench", up: bool = True):
    """A virtual cluster of the default spec with `compute` compute nodes, in process; always torn down."""
    with tempfile.TemporaryDirectory(prefix="corral-bench-", ignore_cleanup_errors=True) as d:
        vc = VirtualCluster(load(write_spec(Path(d), compute, name)))
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


def spread(xs: list[float], digits: int = 2) -> list[str]:
    """[median, min-max] as a table's two cells."""
    return [f"{median(xs):.{digits}f}", f"{min(xs):.{digits}f}-{max(xs):.{digits}f}"]


def verdict(value: float, goal: float | None, *, at_least: bool = False) -> list[str]:
    """[goal, met | NOT met] as a table's two cells (empty without a goal)."""
    if goal is None:
        return ["", ""]
    met = value >= goal if at_least else value <= goal
    return [f"{'>=' if at_least else '<='} {goal}", "met" if met else "NOT met"]


def table(title: str, header: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(str(c)) for c in col) for col in zip(header, *rows)]
    line = lambda cells: "| " + " | ".join(str(c).ljust(w) for c, w in zip(cells, widths)) + " |"  # noqa: E731
    sep = "|" + "|".join("-" * (w + 2) for w in widths) + "|"
    return "\n".join([f"### {title}", line(header), sep, *map(line, rows)])
