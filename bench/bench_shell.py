"""What a user runs, timed from the shell (issue 38): the `corral` process itself, wall clock, on the
default spec `corral up` writes (ctl, gpu01, gpu02, login1; on the bench subnet), image and package
cache warm:

- `corral up` in a fresh directory (after the previous run's `virtual down` and the directory removed);
- `corral apply --yes` on the converged cluster (a no-op), beside the duration the run itself reports;
- `corral --help`.

Run as root, on an otherwise idle machine: .venv/bin/python -m bench.bench_shell [--runs 3]
Goals: up <= 25 s, no-op apply <= 1.5 s, --help <= 0.2 s. Medians of --runs runs.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.common import BENCH_SUBNET, median, table

CORRAL = [sys.executable, "-m", "corral"]
GOALS = {"corral up": 25.0, "corral apply --yes (no-op)": 1.5, "corral --help": 0.2}


def _run(args: list[str], cwd: Path) -> tuple[float, subprocess.CompletedProcess]:
    """`corral ARGS` as a user runs it, on the bench's own directory: `corral up` works on the virtual
    directory (CORRAL_VIRTUAL_DIR, never the user's default one), the rest on its spec (CORRAL_SPEC)."""
    env = {k: v for k, v in os.environ.items() if k not in ("CORRAL_SPEC", "CORRAL_VIRTUAL_DIR")}
    env.update(CORRAL_SPEC=str(cwd / "cluster.yaml"), CORRAL_VIRTUAL_DIR=str(cwd))
    t0 = time.perf_counter()
    p = subprocess.run(CORRAL + args, cwd=cwd, capture_output=True, text=True, timeout=900, env=env)
    return time.perf_counter() - t0, p


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
        up_s, p = _run(["up", "--json"], directory)
        assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
        walls, reported = [], []
        for _ in range(noops):
            wall, p = _run(["apply", "--yes", "--json"], directory)
            assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
            result = json.loads(p.stdout)
            assert result.get("totals", {}).get("changed", 0) == 0, result.get("totals")
            walls.append(wall)
            reported.append(float(result.get("duration_s", 0.0)))
        helps = [_run(["--help"], directory)[0] for _ in range(3)]
        return {"corral up": up_s, "corral apply --yes (no-op)": median(walls), "run's own duration": median(reported),
                "corral --help": median(helps)}
    finally:
        _run(["virtual", "down", "--dir", str(directory)], directory)
        shutil.rmtree(directory, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--noops", type=int, default=3, help="no-op applies per run")
    args = ap.parse_args()
    runs = [one_run(args.noops) for _ in range(args.runs)]
    rows = []
    for what in ("corral up", "corral apply --yes (no-op)", "run's own duration", "corral --help"):
        xs = [r[what] for r in runs]
        goal = GOALS.get(what)
        rows.append([what, f"{median(xs):.2f}", f"{min(xs):.2f}-{max(xs):.2f}",
                     f"<= {goal}" if goal else "", ("met" if median(xs) <= goal else "NOT met") if goal else ""])
    print(table(f"from the shell, default spec (4 nodes), median of {args.runs}",
                ["what a user runs", "median s", "range s", "goal s", ""], rows))


if __name__ == "__main__":
    main()
