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
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import NamedTuple

from bench.common import BENCH_SUBNET, median, table

CORRAL = [sys.executable, "-m", "corral"]
GOALS = {"corral up": 25.0, "corral apply --yes (no-op)": 1.5, "corral --help": 0.2}


class Timing(NamedTuple):
    wall: float  # seconds, from the shell
    cpu: float   # user + sys seconds of the corral process and the children it waited for
    load: float  # the machine's 1-minute load average when it started


def _cpu_of_children() -> float:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def run_timed(command: list[str], **kwargs) -> tuple[Timing, subprocess.CompletedProcess]:
    """`command` to its end: wall clock, its CPU time and the load it ran under."""
    load, cpu0, t0 = os.getloadavg()[0], _cpu_of_children(), time.perf_counter()
    p = subprocess.run(command, capture_output=True, text=True, **kwargs)
    return Timing(time.perf_counter() - t0, _cpu_of_children() - cpu0, load), p


def _run(args: list[str], cwd: Path) -> tuple[Timing, subprocess.CompletedProcess]:
    """`corral ARGS` as a user runs it, on the bench's own directory: `corral up` works on the virtual
    directory (CORRAL_VIRTUAL_DIR, never the user's default one), the rest on its spec (CORRAL_SPEC)."""
    env = {k: v for k, v in os.environ.items() if k not in ("CORRAL_SPEC", "CORRAL_VIRTUAL_DIR")}
    env.update(CORRAL_SPEC=str(cwd / "cluster.yaml"), CORRAL_VIRTUAL_DIR=str(cwd))
    return run_timed(CORRAL + args, cwd=cwd, timeout=900, env=env)


def _spec(directory: Path) -> None:
    """The spec `corral up` writes, on the bench subnet (a user's cluster on the default one is left alone)."""
    from corral.virtual.defaults import default_spec
    from corral.virtual.keys import ensure_key, user_key_file
    from corral.virtual.defaults import EXAMPLE_USER
    key = ensure_key(user_key_file(directory / ".corral", EXAMPLE_USER), f"{EXAMPLE_USER}@bench")
    (directory / "cluster.yaml").write_text(default_spec("bench", 2, 4, "h100", BENCH_SUBNET, "corralbench0", 18088,
                                                         user_key=key))


def one_run(noops: int) -> dict:
    directory = Path(tempfile.mkdtemp(prefix="corral-bench-shell-"))
    try:
        _spec(directory)
        up, p = _run(["up", "--json"], directory)
        assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
        noop, reported = [], []
        for _ in range(noops):
            timing, p = _run(["apply", "--yes", "--json"], directory)
            assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
            result = json.loads(p.stdout)
            assert result.get("totals", {}).get("changed", 0) == 0, result.get("totals")
            noop.append(timing)
            reported.append(float(result.get("duration_s", 0.0)))
        helps = [_run(["--help"], directory)[0] for _ in range(3)]
        own = median(reported)
        return {"corral up": up, "corral apply --yes (no-op)": _median(noop),
                "run's own duration": Timing(own, float("nan"), float("nan")), "corral --help": _median(helps)}
    finally:
        _run(["virtual", "down", "--dir", str(directory)], directory)
        shutil.rmtree(directory, ignore_errors=True)


def _median(timings: list[Timing]) -> Timing:
    return Timing(*(median([getattr(t, f) for t in timings]) for f in Timing._fields))


def row(what: str, timings: list[Timing], goal: float | None) -> list[str]:
    """One line of the table: median wall and its range, median CPU s and load, the goal."""
    walls = [t.wall for t in timings]
    cpu, load = median([t.cpu for t in timings]), median([t.load for t in timings])
    return [what, f"{median(walls):.2f}", f"{min(walls):.2f}-{max(walls):.2f}",
            "" if cpu != cpu else f"{cpu:.2f}", "" if load != load else f"{load:.2f}",
            f"<= {goal}" if goal else "", ("met" if median(walls) <= goal else "NOT met") if goal else ""]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--noops", type=int, default=3, help="no-op applies per run")
    args = ap.parse_args()
    runs = [one_run(args.noops) for _ in range(args.runs)]
    rows = [row(what, [r[what] for r in runs], GOALS.get(what))
            for what in ("corral up", "corral apply --yes (no-op)", "run's own duration", "corral --help")]
    print(table(f"from the shell, default spec (4 nodes), median of {args.runs} ({os.cpu_count()} cores)",
                ["what a user runs", "median wall s", "range s", "CPU s", "load (1 min)", "goal s", ""], rows))


if __name__ == "__main__":
    main()
