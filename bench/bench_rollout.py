"""Rollout overhead per batch on the virtual cluster: the driver rollout of TEST stand-in packages
(tests/vcluster/standin.py) through 4 GPU nodes, one node per batch after a canary, there and back
(1.0 -> 1.1 -> 1.0). For each batch: its duration (workflows/batches.py records it), the node's own
span from its drain to its resume (install, reboot, verify), and the difference: what the policy and
the orchestration add per batch (Slurm questions, the batch bookkeeping, pmap, the pause if any).

    .venv/bin/python -m bench.bench_rollout [--rounds 1]

Needs root and the virtual cluster's tools; uses the bench subnet (bench/common.py)."""

from __future__ import annotations

import argparse
import subprocess
import tempfile
import time
from pathlib import Path

from corral.engine import patch_gevent

patch_gevent()

from bench.common import BENCH_SUBNET, bench_cluster, median, table  # noqa: E402
from corral.spec.loader import load  # noqa: E402
from corral.virtual.repo import start_server, stop_server  # noqa: E402
from corral.workflows.converge import converge  # noqa: E402
from tests.vcluster.standin import PACKAGE, build_repo  # noqa: E402

PORT = 18089
NODES = ["gpu01", "gpu02", "gpu03", "gpu04"]
DRIVER = ('nvidia:\n  driver: {{version: "{v}", package: ' + PACKAGE + '}}\n'
          'rollout: {{canary: {c}, batch: {b}, drain_timeout: 60, reboot_timeout: 180}}\n')


def roll(vc, base: str, version: str, canary: int, batch: str):
    vc.cluster.path.write_text(base + DRIVER.format(v=version, c=canary, b=batch))
    lines: list[tuple[float, str]] = []
    result = converge(load(vc.cluster.path), "apply", command=f"bench-rollout-{version}",
                      say=lambda line: lines.append((time.monotonic(), line)))
    if not result.ok:
        raise SystemExit(f"rollout to {version} failed: {[(n, r.error) for n, r in result.nodes.items() if r.error]}")
    spans = {}
    for t, line in lines:
        for n in NODES:
            if line.startswith(f"node {n}: driver rollout: drain:"):
                spans[n] = [t, t]
            elif line.startswith(f"node {n}: driver rollout: resume:"):
                spans[n][1] = t
    rows = []
    for b in (x for x in result.rollouts if x["what"] == "driver rollout"):
        span = max(spans[n][1] - spans[n][0] for n in b["nodes"])
        rows.append((f"{version} {b['batch']}", ",".join(b["nodes"]), b["duration_s"], span, b["duration_s"] - span))
    return rows


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=1, help="there-and-back rounds (each: 8 batches)")
    args = ap.parse_args()
    gateway = str(BENCH_SUBNET.network_address + 1)
    with tempfile.TemporaryDirectory(prefix="corral-bench-repo-") as d, bench_cluster(4, name="brollout") as vc:
        repo = build_repo(Path(d), {"1.0": False, "1.1": False})
        server = start_server(repo, gateway, PORT, Path(d) / "repo.log")
        try:
            for n in NODES:
                subprocess.run(vc.ssh_cmd(vc.node(n).node.address, f"echo 'deb [trusted=yes] http://{gateway}:{PORT} ./' "
                                          "> /etc/apt/sources.list.d/corral-test.list"), check=True, timeout=60)
            base = vc.cluster.path.read_text()
            roll(vc, base, "1.0", 0, '"100%"')  # the first install, all at once: not measured
            rows = []
            for _ in range(args.rounds):
                rows += roll(vc, base, "1.1", 1, "1")
                rows += roll(vc, base, "1.0", 1, "1")
        finally:
            stop_server(server)
    print(table("driver rollout, one node per batch (seconds)", ["batch", "nodes", "batch", "node drain..resume",
                                                                 "overhead"],
                [[b, n, f"{d:.1f}", f"{s:.1f}", f"{o:.1f}"] for b, n, d, s, o in rows]))
    over = [o for *_, o in rows]
    print(f"\nmedian overhead per batch: {median(over):.1f} s of a median batch of "
          f"{median([d for _, _, d, _, _ in rows]):.1f} s ({len(rows)} batches)")


if __name__ == "__main__":
    main()
