"""`corral up` on 3 nodes from a cached image: virtual up -> apply -> validate, median of several runs,
with the apply's time split by category (engine/timing.py, the split `apply` prints).

Run as root: .venv/bin/python -m bench.bench_up [--runs 3]
Goal (issue 16): <= 25 s; earlier figure 45 s (apply alone 41-50 s).
"""

from __future__ import annotations

import argparse

from corral.engine import patch_gevent

patch_gevent()

from bench.common import bench_cluster, median, table, timed  # noqa: E402
from corral.checks.validate import validate  # noqa: E402
from corral.engine.timing import breakdown  # noqa: E402
from corral.workflows.converge import converge  # noqa: E402

BEFORE_S = 45.0
GOAL_S = 25.0


def one_run() -> dict:
    with bench_cluster(2, up=False) as vc:
        held: dict = {}
        up_s = timed(vc.up)
        apply_s = timed(lambda: held.update(result=converge(vc.cluster, "apply", command="bench")))
        assert held["result"].ok, held["result"].failed_nodes
        validate_s = timed(lambda: held.update(report=validate(vc.cluster)))
        assert held["report"].ok, [c.message for c in held["report"].checks if c.status == "fail"]
        split = breakdown(held["result"].to_json())
        return {"up": up_s, "apply": apply_s, "validate": validate_s, "total": up_s + apply_s + validate_s,
                "categories": split["categories"], "slowest": split["slowest_ops"][:3]}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    runs = [one_run() for _ in range(args.runs)]
    total = median([r["total"] for r in runs])
    rows = [[part, f"{median([r[part] for r in runs]):.1f}", f"{min(r[part] for r in runs):.1f}-"
             f"{max(r[part] for r in runs):.1f}"] for part in ("up", "apply", "validate", "total")]
    print(table(f"corral up, 3 nodes, cached image (median of {args.runs})", ["part", "median s", "range s"], rows))
    print(f"\ntotal {total:.1f} s: {total / BEFORE_S:.2f} x the earlier {BEFORE_S:.0f} s; goal <= {GOAL_S:.0f} s: "
          f"{'met' if total <= GOAL_S else 'NOT met'}\n")
    names = sorted({k for r in runs for k in r["categories"]}, key=lambda k: -median(
        [r["categories"].get(k, 0.0) for r in runs]))
    apply_median = median([r["apply"] for r in runs])
    cats = [[k, f"{median([r['categories'].get(k, 0.0) for r in runs]):.1f}",
             f"{100 * median([r['categories'].get(k, 0.0) for r in runs]) / apply_median:.0f} %"] for k in names]
    print(table("apply, by category (medians)", ["category", "s", "share of apply"], cats))
    slow = [[o["node"], o["op"], f"{o['s']:.1f}", o["category"]] for o in runs[-1]["slowest"]]
    print()
    print(table("slowest operations (last run)", ["node", "operation", "s", "category"], slow))


if __name__ == "__main__":
    main()
