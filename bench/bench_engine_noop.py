"""Engine no-op re-run of the smoke deploy at 4 and 16 nodes (medians of several runs).

Run as root: .venv/bin/python -m bench.bench_engine_noop [--runs 5]
Goal: 16-node no-op time <= 1.5 x 4-node no-op time.
"""

from __future__ import annotations

import argparse
import subprocess
import sys

from corral.engine import patch_gevent

patch_gevent()  # as the CLI does: parallel SSH

from bench.common import bench_cluster, median, table, timed  # noqa: E402
from corral.deploy.smoke import smoke  # noqa: E402
from corral.engine import run  # noqa: E402


def _cpu() -> tuple[int, int]:
    fields = [int(x) for x in open("/proc/stat").readline().split()[1:]]
    return sum(fields), fields[3] + fields[4]


def busy(cluster) -> float:
    """Share of the host's CPUs busy during one no-op apply (the nodes' sshd + commands run here too)."""
    a = _cpu()
    run(cluster, [smoke], mode="apply", record=False)
    b = _cpu()
    return 100 * ((b[0] - a[0]) - (b[1] - a[1])) / max(1, b[0] - a[0])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    rows, medians = [], {}
    for total in (4, 16):
        with bench_cluster(total - 1) as vc:
            first = timed(lambda: run(vc.cluster, [smoke], mode="apply", record=False))
            times, plans = [], []
            for _ in range(args.runs):
                holder = {}
                times.append(timed(lambda: holder.update(r=run(vc.cluster, [smoke], mode="apply",
                                                                   record=False))))
                assert holder["r"].ok and holder["r"].changed == 0, holder["r"].to_json()
                plans.append(timed(lambda: run(vc.cluster, [smoke], mode="plan", record=False)))
            cli = [timed(lambda: subprocess.run(
                [sys.executable, "-m", "corral", "apply", "--yes", "-f", str(vc.cluster.path)],
                check=True, capture_output=True)) for _ in range(args.runs)]
            medians[total] = median(times)
            rows.append([str(total), f"{first:.1f}", f"{median(times):.2f}", f"{median(plans):.2f}",
                         f"{median(cli):.2f}", f"{busy(vc.cluster):.0f}%"])
    ratio = medians[16] / medians[4]
    print(table("engine: smoke deploy (package + template + service)",
                ["nodes", "first apply s", "no-op apply s (median)", "plan s (median)",
                 "`corral apply` CLI s (median)", "host CPU busy in no-op"], rows))
    print(f"\n16-node / 4-node no-op ratio (engine): {ratio:.2f} "
          f"(goal <= 1.5: {'met' if ratio <= 1.5 else 'NOT met'})")


if __name__ == "__main__":
    main()
