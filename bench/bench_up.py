"""`corral up` as a user runs it (issue 38): the `corral` process from the shell on the default spec it
writes (ctl, gpu01, gpu02, login1; on the bench subnet), image and package cache warm, in a fresh
directory each run: wall clock, its CPU time (user + sys, with its children) and the load it started
under; beside it the split of the same run: when its "virtual cluster up" line came, the apply's own
time by category read back from the run's journal (`corral history --run ID --timing --json`,
engine/timing.py), and what is left (validate, output, exit). With --floor each run is followed by
the hand floor (bench_floor.py) on a fresh cluster, phase beside phase, and the ratio floor / corral up.

Run as root on an otherwise idle machine: .venv/bin/python -m bench.bench_up [--runs 3] [--floor]
Goals (issue 38): corral up <= 25 s from the shell; floor / corral up >= 0.9. Medians of --runs runs.
"""

from __future__ import annotations

import argparse
import json
import os

from bench import bench_floor
from bench.common import median, spread, table, verdict
from bench.from_shell import corral, journaled, shell_cluster

GOAL_S = 25.0
FLOOR_GOAL = 0.9
HEADER = ["phase", "corral up s", "range s", "hand floor s", "range s", "corral - floor s", "CPU s", "load (1 min)",
          "goal", ""]


def one_run() -> dict:
    """One `corral up` from the shell: {wall, cpu, load, phases: {name: s}, slowest: the run's slowest ops}."""
    with shell_cluster() as directory:
        ran = corral(["up", "--json"], directory).check()
        run = journaled(directory, json.loads(ran.stdout)["apply"]["run_id"])
        up_s, apply_s = ran.at("virtual cluster up"), float(run["duration_s"])
        categories = run["time"]["categories"]
        phases = {"virtual up": up_s, "apply": apply_s, "install": categories.get("install", 0.0),
                  "rest of apply": apply_s - categories.get("install", 0.0),
                  **{f"apply: {k}": v for k, v in categories.items() if k != "install"},
                  "after apply": ran.timing.wall - up_s - apply_s, "total": ran.timing.wall}
        return {"cpu": ran.timing.cpu, "load": ran.timing.load, "phases": phases,
                "slowest": run["time"]["slowest_ops"][:3]}


# (row, corral's phase, the floor's phase(s) it compares with)
ROWS = [("virtual up (floor: `corral virtual up`)", "virtual up", ["up"]),
        ("apply, the run's own time (journal)", "apply", ["install", "config + start"]),
        ("  install", "install", ["install"]),
        ("  the rest of the apply (floor: config + start)", "rest of apply", ["config + start"])]
AFTER = ("after the apply: validate, exit (floor: ready + GPU srun)", "after apply", ["ready + GPU srun"])


def rows(ups: list[dict], floors: list[dict]) -> list[list[str]]:
    """The table: corral's phases beside the floor's, the apply's categories, the totals, the ratio."""
    def values(key: str) -> list[float]:
        return [u["phases"].get(key, 0.0) for u in ups]

    def floor_values(keys: list[str]) -> list[float]:
        return [sum(f[k] for k in keys) for f in floors]

    def line(label: str, key: str, floor_keys: list[str]) -> list[str]:
        mine, theirs = values(key), floor_values(floor_keys)
        beside = [*spread(theirs, 1), f"{median(mine) - median(theirs):+.1f}"] if theirs else ["", "", ""]
        return [label, *spread(mine, 1), *beside, "", "", "", ""]

    categories = sorted({k for u in ups for k in u["phases"] if k.startswith("apply: ")},
                        key=lambda k: -median(values(k)))
    total = line("total, wall from the shell", "total", ["total"])
    total[6:] = [f"{median([u['cpu'] for u in ups]):.2f}", f"{median([u['load'] for u in ups]):.2f}",
                 *verdict(median(values("total")), GOAL_S)]
    out = [*(line(*r) for r in ROWS), *([f"    {k}", *spread(values(k), 1), *[""] * 7] for k in categories),
           line(*AFTER), total]
    if floors:
        ratio = median(floor_values(["total"])) / median(values("total"))
        each = [f["total"] / u["phases"]["total"] for u, f in zip(ups, floors)]
        out.append(["floor / corral up (of the medians; range: run by run)", f"{ratio:.2f}",
                    f"{min(each):.2f}-{max(each):.2f}", "", "", "", "",
                    f"{median([f['load'] for f in floors]):.2f}", *verdict(ratio, FLOOR_GOAL, at_least=True)])
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--floor", action="store_true", help="after each run, the hand floor (bench_floor.py)")
    args = ap.parse_args()
    ups, floors = [], []
    for _ in range(args.runs):
        ups.append(one_run())
        if args.floor:
            floors.append(bench_floor.one_run())
    print(table(f"corral up from the shell, default spec (4 nodes), cached image, median of {args.runs} "
                f"({os.cpu_count()} cores){', beside the hand floor' if floors else ''}", HEADER, rows(ups, floors)))
    slow = [[o["node"], o["op"], f"{o['s']:.1f}", o["category"]] for o in ups[-1]["slowest"]]
    print()
    print(table("slowest operations (last run, from its journal)", ["node", "operation", "s", "category"], slow))


if __name__ == "__main__":
    main()
