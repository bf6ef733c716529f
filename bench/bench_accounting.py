"""Slurm's accounting commands on the controller with and without immediate ACKs on its own address
(render/quickack.py): the median latency of `sacctmgr -n show cluster`, `sacctmgr -n show assoc` and
`sacct -n -X` on a freshly applied virtual cluster (controller = accounting node), each run --runs
times with the route's `quickack 1` (as apply leaves it), then without it (removed by hand), then
the route put back as it was.

Run as root: .venv/bin/python -m bench.bench_accounting [--runs 9]
"""

from __future__ import annotations

import argparse
import shlex
import subprocess

from corral.engine import patch_gevent

patch_gevent()

from bench.common import bench_cluster, median, table  # noqa: E402
from corral.workflows.converge import converge  # noqa: E402

COMMANDS = ("sacctmgr -n show cluster", "sacctmgr -n show assoc", "sacct -n -X")


def on_ctl(vc, address: str, script: str) -> str:
    done = subprocess.run(vc.ssh_cmd(address, "sh", "-c", shlex.quote(script)), capture_output=True,
                          text=True, timeout=120, check=True)
    return done.stdout


def latencies_ms(vc, address: str, command: str, runs: int) -> list[float]:
    """Each run timed on the node itself (date +%s%N around it): no SSH in the figure."""
    script = (f"for i in $(seq {runs}); do s=$(date +%s%N); {command} >/dev/null; e=$(date +%s%N); "
              "echo $(( (e - s) / 1000 )); done")
    return [int(us) / 1000 for us in on_ctl(vc, address, script).split()]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=9)
    args = ap.parse_args()
    with bench_cluster(1) as vc:
        result = converge(vc.cluster, "apply", command="bench")
        assert result.ok, result.failed_nodes
        ctl = vc.cluster.with_role("accounting")[0]
        address = str(ctl.address)
        route = on_ctl(vc, address, f"ip -4 route show table local exact {address} type local").strip()
        assert " quickack 1" in f" {route} ", f"apply left the route without quickack: {route!r}"
        with_ack = {c: median(latencies_ms(vc, address, c, args.runs)) for c in COMMANDS}
        plain = route.replace(" quickack 1", "")
        on_ctl(vc, address, f"ip route change table local {plain}")
        try:
            without = {c: median(latencies_ms(vc, address, c, args.runs)) for c in COMMANDS}
        finally:
            on_ctl(vc, address, f"ip route change table local {route}")
    rows = [[c, f"{without[c]:.0f}", f"{with_ack[c]:.0f}", f"{without[c] / max(with_ack[c], 0.001):.0f} x"]
            for c in COMMANDS]
    print(table(f"accounting commands on the controller, ms (median of {args.runs})",
                ["command", "without quickack", "with quickack (apply)", "ratio"], rows))


if __name__ == "__main__":
    main()
