"""Node-local deploys (health, job hooks) on every compute node: the SSH engine from the control host
vs corral itself on each node started through Slurm (`corral fanout --via ssh|slurm`), at several
cluster sizes. Per run: wall time, this process's CPU (the control host's corral: user + system), the
Slurm controller node's CPU and all nodes' CPU (their cgroups' cpuacct.usage), for a no-op and for a
change on every node (health.max_gpu_temp_c toggled). The nodes share this machine's two cores with
corral, so the CPU columns, not the wall times, say how each way scales.

Run as root: .venv/bin/python -m bench.bench_fanout [--sizes 16,64] [--runs 3]
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
from pathlib import Path

from corral.engine import patch_gevent

patch_gevent()

from bench.common import bench_cluster, median, table, timed  # noqa: E402
from corral.fanout.driver import fan_out  # noqa: E402
from corral.spec.loader import load  # noqa: E402
from corral.virtual import node as vnode  # noqa: E402
from corral.workflows.converge import converge  # noqa: E402

DEPLOYS = ["health", "jobhooks"]


def cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def node_cpu(vc, name: str | None) -> float:
    """CPU seconds of one node's cgroup (None: all nodes of the cluster)."""
    base = vnode.CG_ROOT / "cpuacct" / vc.cg_prefix
    path = (base / name if name else base) / "cpuacct.usage"
    return int(path.read_text()) / 1e9


def set_temp(vc, value: int):
    """The spec with health.max_gpu_temp_c = value: every compute node's health config changes."""
    path = Path(vc.cluster.path)
    text = path.read_text()
    lines = [line for line in text.splitlines() if not line.startswith("# bench-temp")]
    body = "\n".join(lines)
    if "\nhealth:" in body:
        body = body.split("\nhealth:")[0]
    path.write_text(body + f"\nhealth:\n  max_gpu_temp_c: {value}\n")
    return load(path)


def fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def one(vc, cluster, via: str, changes: int) -> list[float]:
    held: dict = {}
    c0, n0, a0 = cpu_s(), node_cpu(vc, "ctl"), node_cpu(vc, None)
    wall = timed(lambda: held.update(r=fan_out(cluster, DEPLOYS, via=via)))
    r = held["r"]
    assert r.ok, {n: x.error for n, x in r.nodes.items() if not x.ok}
    got = sum(1 for x in r.nodes.values() for o in x.ops if o.status == "changed")
    assert got == changes, (via, got, changes)
    print(f"  {via}: {wall:.2f} s, {changes} changes, open files {fds()}", file=sys.stderr, flush=True)
    return [wall, cpu_s() - c0, node_cpu(vc, "ctl") - n0, node_cpu(vc, None) - a0]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="16,64", help="total node counts (controller + login1 + compute)")
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    rows = []
    for total in (int(s) for s in args.sizes.split(",")):
        with bench_cluster(total - 2) as vc:
            cluster = set_temp(vc, 85)
            first = converge(cluster, "apply", command="bench-first")
            assert first.ok, first.failed_nodes
            print(f"{total} nodes: first apply {first.duration_s:.1f} s, open files {fds()}", file=sys.stderr, flush=True)
            computes = len([n for n in cluster.nodes if "compute" in n.roles])
            c0 = cpu_s()
            send = timed(lambda: fan_out(cluster, DEPLOYS, via="slurm"))
            rows.append([str(total), "slurm", "first (runtime sent)", f"{send:.1f}", f"{cpu_s() - c0:.2f}", "", "", ""])
            temp = 85
            for what in ("no-op", "change"):
                samples: dict[str, list] = {"ssh": [], "slurm": []}
                for _ in range(args.runs):
                    for via in ("ssh", "slurm"):
                        if what == "change":
                            temp = 86 if temp == 85 else 85
                            cluster = set_temp(vc, temp)
                        samples[via].append(one(vc, cluster, via, computes if what == "change" else 0))
                for via in ("ssh", "slurm"):
                    wall, cpu, ctl, allc = (median([s[i] for s in samples[via]]) for i in range(4))
                    rows.append([str(total), via, what, f"{wall:.2f}", f"{cpu:.2f}", f"{cpu / computes:.3f}",
                                 f"{ctl:.2f}", f"{allc:.1f}"])
                    print(" | ".join(rows[-1]), file=sys.stderr, flush=True)
    print(table(f"node-local deploys (health, jobhooks) on every compute node, median of {args.runs}",
                ["nodes", "via", "run", "wall s", "control host CPU s", "per compute node",
                 "controller node CPU s", "all nodes CPU s"], rows))


if __name__ == "__main__":
    main()
