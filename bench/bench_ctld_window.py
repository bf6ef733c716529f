"""slurmctld's state-save window, measured: jobs acknowledged (sbatch returned an ID) d seconds before a
kill -9 of slurmctld, and how many of them the restarted slurmctld still has; beside it, how many corral's
judge (node/ctld_restart.py) named as lost, which must be the same number.

    .venv/bin/python -m bench.bench_ctld_window [--runs 3] [--jobs 50]

One virtual cluster (bench subnet, ctl + gpu01, applied). Each round: --jobs held jobs submitted on the
controller in a burst, sleep d, kill -9 slurmctld, wait until it serves again (systemd restarts it), count
the burst's jobs in squeue, read the judge's verdict, cancel the rest.
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import time

from corral.engine import patch_gevent

patch_gevent()

from bench.common import bench_cluster, median, table  # noqa: E402
from corral.render.ctld_restart import JUDGE  # noqa: E402
from corral.workflows.converge import converge  # noqa: E402

DELAYS = (0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0)


def on(vc, address: str, script: str, timeout: float = 120) -> str:
    return subprocess.run(vc.ssh_cmd(address, "sh", "-c", shlex.quote(script)), capture_output=True, text=True,
                          timeout=timeout, check=True).stdout


def round_(vc, address: str, jobs: int, delay: float) -> tuple[int, int]:
    """(jobs gone, jobs the judge named as lost) for one burst killed `delay` s after its last sbatch."""
    burst = (f"for i in $(seq {jobs}); do sbatch --parsable --hold -A research -o /dev/null --wrap 'sleep 1'; done; "
             # reset-failed: the start limit (10 in 120 s, render/restart.py) would stop a kill-a-round bench
             f"sleep {delay}; systemctl reset-failed slurmctld; kill -9 $(systemctl show -p MainPID --value slurmctld)")
    ids = on(vc, address, burst).split()
    deadline, queued = time.monotonic() + 60, None
    while queued is None and time.monotonic() < deadline:
        try:  # serving again (systemd restarted it): its queue as it recovered it
            queued = set(on(vc, address, "scontrol ping | grep -q 'is UP' && squeue -h -o %i").split())
        except subprocess.CalledProcessError:
            time.sleep(0.3)
    if queued is None:
        raise SystemExit("slurmctld did not serve again within 60 s")
    judged = json.loads(on(vc, address, JUDGE))["last"]
    on(vc, address, f"scancel {' '.join(ids)}; true")
    time.sleep(1)
    return sum(1 for j in ids if j not in queued), len(judged["lost"])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--jobs", type=int, default=50)
    args = ap.parse_args()
    with bench_cluster(1, name="bwindow") as vc:
        result = converge(vc.cluster, "apply", command="bench")
        assert result.ok, result.failed_nodes
        address = str(vc.cluster.with_role("controller")[0].address)
        rows, agree = [], True
        for d in DELAYS:
            gone, named = zip(*(round_(vc, address, args.jobs, d) for _ in range(args.runs)))
            agree &= gone == named
            rows.append([f"{d:.0f}", f"{median(gone):.0f} / {args.jobs}", " ".join(map(str, gone)),
                         " ".join(map(str, named))])
    print(table(f"jobs gone after a kill -9 of slurmctld, d s after the burst's last sbatch (median of {args.runs})",
                ["d (s)", "gone (median)", "gone, each run", "named lost by corral, each run"], rows))
    print(f"\ncorral's judge named exactly the jobs gone in every run: {agree}")


if __name__ == "__main__":
    main()
