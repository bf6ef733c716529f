"""No-op `apply` of every component at several cluster sizes of the default spec (ctl, GPU nodes,
login1): in process, wall time, corral's own CPU seconds (this process: user + system, so the nodes'
sshd and commands, which share this machine's cores, are not counted) per node, and round trips per
node (commands and file transfers over SSH); at the size `corral up` writes (4 nodes), also as a user
runs it (issue 38): `corral apply --yes` from the shell on the same cluster, wall clock, the process's
CPU time and the load it started under, beside the run's own time and where it went, read back from
its journal (`corral history --run ID --timing --json`).

Run as root: .venv/bin/python -m bench.bench_noop_scale [--sizes 4,16] [--runs 3]
Goals (issues 16, 38): <= 1.5 s at 4 nodes from the shell; CPU-s per node flat from 4 to 64 nodes.
Earlier figures: no-op of 3 nodes 2.0-2.7 s; 16/4-node no-op ratio 1.84.
"""

from __future__ import annotations

import argparse
import resource
from collections import Counter
from pathlib import Path

from corral.engine import patch_gevent

patch_gevent()

from pyinfra.connectors.ssh import SSHConnector  # noqa: E402

from bench.common import bench_cluster, median, spread, table, timed, verdict  # noqa: E402
from bench.from_shell import noop_apply  # noqa: E402
from corral.engine.timing import one_line  # noqa: E402
from corral.workflows.converge import converge  # noqa: E402

DEFAULT_SIZE = 4  # the spec `corral up` writes: ctl, gpu01, gpu02, login1
GOAL_S = 1.5

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


def shell_rows(directory: Path, runs: int, size: int) -> list[list[str]]:
    """Rows for `runs` no-op `corral apply --yes` from the shell, and the runs' own time (journal)."""
    samples = [noop_apply(directory) for _ in range(runs)]
    walls, own = [t.wall for t, _ in samples], [run["duration_s"] for _, run in samples]
    cpu = median([t.cpu for t, _ in samples])
    names = {k for _, run in samples for k in run["time"]["categories"]}
    split = {k: median([run["time"]["categories"].get(k, 0.0) for _, run in samples]) for k in names}
    split = dict(sorted(split.items(), key=lambda kv: -kv[1]))
    return [[str(size), str(size), "`corral apply --yes`, from the shell", "", *spread(walls), f"{cpu:.2f}",
             f"{cpu / size:.3f}", "", f"{median([t.load for t, _ in samples]):.2f}", *verdict(median(walls), GOAL_S),
             ""],
            [str(size), str(size), "  of which the run's own time (journal)", "", *spread(own), "", "", "", "", "",
             "", one_line({"total_s": median(own), "categories": split}, shown=6)]]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="4,16", help="total node counts (controller + compute + login1)")
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
            rows.append([str(total), str(nodes), "in process (converge)", f"{first.duration_s:.1f}",
                         *spread([s[0] for s in samples]), f"{cpu:.2f}", f"{cpu / nodes:.3f}", f"{trips:.1f}", "",
                         "", "", ""])
            if total == DEFAULT_SIZE:
                rows += shell_rows(vc.cluster.path.parent, args.runs, nodes)
    print(table(f"no-op apply, every component, default spec (median of {args.runs})",
                ["size", "nodes", "how", "first apply s", "no-op wall s", "range s", "CPU s", "CPU s per node",
                 "round trips per node", "load (1 min)", "goal s", "", "where the run's time went"], rows))
    sizes = sorted(walls)
    if len(sizes) > 1:
        lo, hi = sizes[0], sizes[-1]
        print(f"\n{hi}/{lo}-node no-op wall ratio (in process) {walls[hi] / walls[lo]:.2f} (earlier 16/4: 1.84); "
              f"CPU s per node {per_node[lo]:.3f} -> {per_node[hi]:.3f} ({per_node[hi] / per_node[lo]:.2f} x)")


if __name__ == "__main__":
    main()
