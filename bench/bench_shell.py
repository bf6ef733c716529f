"""What a user runs, timed from the shell (issue 38): the `corral` process itself, wall clock, on the
default spec `corral up` writes (ctl, gpu01, gpu02, login1; on the bench subnet), image and package
cache warm:

- `corral up` in a fresh directory (after the previous run's `virtual down` and the directory removed);
- `corral apply --yes` on the converged cluster (a no-op), beside the duration the run itself reports;
- `corral --help`.

Each figure is printed with the CPU time the `corral` process used (user + sys, its waited-for children
included) and the machine's 1-minute load average when it started: a wall time taken on a busy machine
is visibly so (CPU s well under wall s, load above the core count).

Run as root, on an otherwise idle machine: .venv/bin/python -m bench.bench_shell [--runs 3]
Goals: up <= 25 s, no-op apply <= 1.5 s, --help <= 0.2 s. Medians of --runs runs.
"""

from __future__ import annotations

import argparse
import os

from bench.common import median, table
from bench.from_shell import SHELL_HEADER, Timing, corral, median_timing, noop_apply, row, shell_cluster

GOALS = {"corral up": 25.0, "corral apply --yes (no-op)": 1.5, "corral --help": 0.2}


def one_run(noops: int) -> dict:
    with shell_cluster() as directory:
        up = corral(["up", "--json"], directory).check().timing
        noop = [noop_apply(directory) for _ in range(noops)]
        helps = [corral(["--help"], directory).check().timing for _ in range(3)]
        own = median([run["duration_s"] for _, run in noop])
        return {"corral up": up, "corral apply --yes (no-op)": median_timing([t for t, _ in noop]),
                "run's own duration": Timing(own, float("nan"), float("nan")), "corral --help": median_timing(helps)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--noops", type=int, default=3, help="no-op applies per run")
    args = ap.parse_args()
    runs = [one_run(args.noops) for _ in range(args.runs)]
    rows = [row(what, [r[what] for r in runs], GOALS.get(what))
            for what in ("corral up", "corral apply --yes (no-op)", "run's own duration", "corral --help")]
    print(table(f"from the shell, default spec (4 nodes), median of {args.runs} ({os.cpu_count()} cores)",
                SHELL_HEADER, rows))


if __name__ == "__main__":
    main()
