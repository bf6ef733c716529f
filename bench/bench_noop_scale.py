"""No-op `apply` of every component at several cluster sizes: wall time, corral's own CPU seconds
(this process: user + system, so the nodes' sshd and commands, which share this machine's cores, are
not counted) per node, and round trips per node (commands and file transfers over SSH).

Run as root: .venv/bin/python -m bench.bench_noop_scale [--sizes 4,16] [--runs 3]
Goals (issue 16): <= 1.5 s at 3-4 nodes; CPU-s per node flat from 4 to 64 nodes.
Earlier figures: no-op of 3 nodes 2.0-2.7 s; 16/4-node no-op ratio 1.84.
"""

from __future__ import annotations

import argparse
import resource
from collections import Counter

from corral.engine import patch_gevent

patch_gevent()

from pyinfra.connectors.ssh import SSHConnector  # noqa: E402

from bench.common import bench_cluster, median, table, timed  # noqa: E402
from corral.workflows.converge import converge  # noqa: E402

TRIPS: Counter = Counter()


def _counting(name: str):
    original = getattr(SSHConnector, name)

    def counted(self, *args, **kwargs):
        TRIPS[self.host.name] += 1
        return original(self, *args, **kwargs)
    setattr(SSHConnector, name, counted)


for _name in ("run_shell_command", "put_file", "get_file"):
    _counting(_name)


def cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def noop(cluster) -> tuple[float, float, float]:
    """(wall s, corral CPU s, round trips per node) of one no-op apply."""
    TRIPS.clear()
    held: dict = {}
    before = cpu_s()
    wall = timed(lambda: held.update(r=converge(cluster, "apply", command="bench-noop")))
    cpu = cpu_s() - before
    r = held["r"]
    assert r.ok and r.changed == 0, [(n, o.name) for n, x in r.nodes.items() for o in x.ops if o.status == "changed"]
    return wall, cpu, sum(TRIPS.values()) / max(1, len(r.nodes))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="4,16", help="total node counts (controller + compute)")
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    rows, walls, per_node = [], {}, {}
    for total in (int(s) for s in args.sizes.split(",")):
        with bench_cluster(total - 2) as vc:  # + the controller and login1
            first = converge(vc.cluster, "apply", command="bench-first")
            assert first.ok, first.failed_nodes
            samples = [noop(vc.cluster) for _ in range(args.runs)]
            nodes = len(vc.cluster.nodes)
            wall, cpu, trips = (median([s[i] for s in samples]) for i in range(3))
            walls[total], per_node[total] = wall, cpu / nodes
            rows.append([str(total), str(nodes), f"{first.duration_s:.1f}", f"{wall:.2f}", f"{cpu:.2f}",
                         f"{cpu / nodes:.3f}", f"{trips:.1f}"])
    print(table(f"no-op apply, every component (median of {args.runs})",
                ["size", "nodes", "first apply s", "no-op wall s", "corral CPU s", "CPU s per node",
                 "round trips per node"], rows))
    sizes = sorted(walls)
    if len(sizes) > 1:
        lo, hi = sizes[0], sizes[-1]
        print(f"\n{hi}/{lo}-node no-op wall ratio {walls[hi] / walls[lo]:.2f} (earlier 16/4: 1.84); "
              f"CPU s per node {per_node[lo]:.3f} -> {per_node[hi]:.3f} ({per_node[hi] / per_node[lo]:.2f} x)")


if __name__ == "__main__":
    main()
