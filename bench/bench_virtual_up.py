"""`virtual up` time from a cached base image, 3 and 16 nodes (medians of several runs).

Run as root: .venv/bin/python -m bench.bench_virtual_up [--runs 3]
Goals (2-core machine): 3 nodes <= 15 s, 16 nodes <= 30 s.
"""

from __future__ import annotations

import argparse

from bench.common import bench_cluster, median, table, timed
from corral.virtual.image import ensure_image


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--sizes", default="3,16", help="total node counts")
    args = ap.parse_args()
    ensure_image()  # cached; not part of the measurement
    rows = []
    for total in (int(s) for s in args.sizes.split(",")):
        times = []
        for _ in range(args.runs):
            with bench_cluster(total - 1, up=False) as vc:
                times.append(timed(vc.up))
        goal = 15 if total <= 3 else 30
        rows.append([str(total), f"{median(times):.1f}", f"{min(times):.1f}-{max(times):.1f}",
                     f"<= {goal}", "yes" if median(times) <= goal else "NO"])
    print(table("corral virtual up (cached image, all nodes accept SSH)",
                ["nodes", "median s", "range s", "goal s", "met"], rows))


if __name__ == "__main__":
    main()
