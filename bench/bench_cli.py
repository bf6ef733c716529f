"""The CLI's own fixed cost, from the shell, without a cluster (issue 38): `corral --help`, `corral spec
check` of a fixture spec, and `python -X importtime` of the CLI's module and of `corral --help`. Each with
its CPU time and the load it ran under (bench/from_shell.py): a figure from a busy machine shows as such.

Run: .venv/bin/python -m bench.bench_cli [--runs 9]   (goal: --help <= 0.2 s)
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

from bench.from_shell import CORRAL, SHELL_HEADER, Timing, row, run_timed
from bench.common import median, table

SPEC = Path(__file__).parents[1] / "tests" / "fixtures" / "spec" / "slurm_valid.yaml"


def importtime(code: list[str]) -> tuple[float, int]:
    """Milliseconds of imports (the sum of -X importtime's self times) and how many modules."""
    done = subprocess.run([sys.executable, "-X", "importtime", *code], capture_output=True, text=True, check=True)
    selfs = [int(line.split("|")[0].split(":")[1]) for line in done.stderr.splitlines()[1:]
             if line.startswith("import time:")]
    return sum(selfs) / 1000, len(selfs)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=9)
    args = ap.parse_args()
    timed = {"corral --help": CORRAL + ["--help"], "corral spec check": CORRAL + ["spec", "check", "-f", str(SPEC)]}
    rows = []
    for what, command in timed.items():
        runs: list[Timing] = []
        for _ in range(args.runs):
            runs.append(run_timed(command).check().timing)
        rows.append(row(what, runs, 0.2 if what == "corral --help" else None))
    print(table(f"the CLI from the shell, median of {args.runs} ({os.cpu_count()} cores)",
                ["what", *SHELL_HEADER[1:]], rows))
    imports = {"import corral.cli.main": ["-c", "import corral.cli.main"], "corral --help": ["-m", "corral", "--help"]}
    lines = []
    for what, code in imports.items():
        found = [importtime(code) for _ in range(args.runs)]
        lines.append([what, f"{median([ms for ms, _ in found]):.1f}", str(found[0][1])])
    print()
    print(table(f"python -X importtime, median of {args.runs} (load {os.getloadavg()[0]:.2f})",
                ["what", "imports ms", "modules"], lines))


if __name__ == "__main__":
    main()
