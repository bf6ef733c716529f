"""Slurm cluster benchmarks on the virtual cluster (medians of several runs; a table printed).

Run as root: .venv/bin/python -m bench.bench_slurm [--runs 3] [--skip-up]
Goals (2-core machine): `corral up` from a cached image to a validated 3-node cluster <= 90 s;
no-op apply 16 compute nodes <= 1.5 x 4 compute nodes; add one node 16 vs 4: ratio <= 1.2.
"""

from __future__ import annotations

import argparse
import re

from corral.engine import patch_gevent

patch_gevent()

from bench.common import bench_cluster, median, table, timed  # noqa: E402
from corral.checks.validate import validate  # noqa: E402
from corral.workflows.converge import converge  # noqa: E402
from corral.spec.loader import load  # noqa: E402
from corral.virtual.cluster import VirtualCluster  # noqa: E402


def apply_ok(cluster) -> None:
    result = converge(cluster, "apply", command="bench")
    assert result.ok, result.failed_nodes


def up_to_validated(runs: int) -> list[float]:
    times = []
    for _ in range(runs):
        with bench_cluster(2, up=False) as vc:
            def job():
                vc.up()
                apply_ok(vc.cluster)
                assert validate(vc.cluster).ok
            times.append(timed(job))
    return times


def grow(vc: VirtualCluster, compute: int) -> VirtualCluster:
    """Add one compute node to the spec and start it (not timed)."""
    spec = vc.cluster.path
    text = spec.read_text()
    width = max(2, len(str(compute)))
    old = f"gpu[{1:0{width}d}-{compute:0{width}d}]"
    new_w = max(2, len(str(compute + 1)))
    text = text.replace(old, f"gpu[{1:0{new_w}d}-{compute + 1:0{new_w}d}]")
    text = re.sub(r"(addresses: \S+-\d+\.\d+\.\d+\.)(\d+)", lambda m: f"{m.group(1)}{int(m.group(2)) + 1}", text)
    spec.write_text(text)
    grown = VirtualCluster(load(spec))
    grown.up()
    return grown


def scale(compute: int, runs: int) -> tuple[float, float, int]:
    with bench_cluster(compute) as vc:
        apply_ok(vc.cluster)
        noop = []
        for _ in range(runs):
            holder = {}
            noop.append(timed(lambda: holder.update(r=converge(vc.cluster, "apply", command="bench"))))
            assert holder["r"].ok and holder["r"].changed == 0
        grown = grow(vc, compute)
        add = timed(lambda: apply_ok(grown.cluster))
        grown.down()
        return median(noop), add, compute


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--skip-up", action="store_true")
    args = ap.parse_args()
    rows = []
    if not args.skip_up:
        ups = up_to_validated(args.runs)
        rows.append(["`corral up` (3 nodes, cached image) to validated", f"{median(ups):.1f}",
                     f"{min(ups):.1f}-{max(ups):.1f}", "<= 90 s", "yes" if median(ups) <= 90 else "NO"])
    small, large = scale(4, args.runs), scale(16, args.runs)
    r_noop, r_add = large[0] / small[0], large[1] / small[1]
    rows += [
        ["no-op apply, 4 compute nodes (median)", f"{small[0]:.2f}", "", "", ""],
        ["no-op apply, 16 compute nodes (median)", f"{large[0]:.2f}", "", "", ""],
        ["no-op ratio 16 / 4", f"{r_noop:.2f}", "", "<= 1.5", "yes" if r_noop <= 1.5 else "NO"],
        ["add 1 node to 4 compute nodes", f"{small[1]:.1f}", "", "", ""],
        ["add 1 node to 16 compute nodes", f"{large[1]:.1f}", "", "", ""],
        ["add-node ratio 16 / 4", f"{r_add:.2f}", "", "<= 1.2", "yes" if r_add <= 1.2 else "NO"],
    ]
    print(table("Slurm on the virtual cluster", ["what", "s", "range", "goal", "met"], rows))


if __name__ == "__main__":
    main()
