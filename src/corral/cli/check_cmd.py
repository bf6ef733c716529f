"""`corral doctor`, `corral validate`, `corral health`: one line per check, or one JSON object;
exit 1 on a failure. Module-level commands that main.py registers (COMMANDS)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from corral.checks.result import Report
from corral.cli.common import JsonOpt, SpecOpt, limit_names, load_cluster, out, print_json

STYLE = {"OK": "green", "WARN": "yellow", "FAIL": "red", "SKIPPED": "dim"}


def show(report: Report, as_json: bool) -> None:
    if as_json:
        print_json(report.to_json())
    else:
        for c in report.checks:
            out.print(f"{c.status:<7} {c.name}: {c.message}", style=STYLE.get(c.status), markup=False,
                      highlight=False)
        out.print("ok" if report.ok else f"FAILED: {len(report.failures)} check(s)", markup=False)
    if not report.ok:
        raise typer.Exit(1)


def doctor(spec: Optional[Path] = SpecOpt, as_json: bool = JsonOpt) -> None:
    """Preflight (changes nothing): SSH with pinned keys, root/sudo, OS, disk, memory, clock,
    ports, GPUs present as the spec says."""
    from corral.checks.doctor import doctor as run_doctor
    show(run_doctor(load_cluster(spec)), as_json)


def validate(spec: Optional[Path] = SpecOpt, as_json: bool = JsonOpt,
             skip_jobs: bool = typer.Option(False, "--skip-jobs", help="read-only: submit no job")) -> None:
    """After deploy: controller, nodes, GRES, a GPU job per node, a multi-node job, accounting,
    munge across nodes (and on real GPUs a burn and NCCL where available)."""
    from corral.checks.validate import validate as run_validate
    show(run_validate(load_cluster(spec), jobs=not skip_jobs), as_json)


def health(spec: Optional[Path] = SpecOpt, node: Optional[str] = typer.Option(None, "--node", "-n",
           help="only these nodes (hostlist)"), as_json: bool = JsonOpt) -> None:
    """Run the node health checks now (read-only: drains and resumes are Slurm's periodic runs)."""
    from corral.checks.health import run_health
    cluster = load_cluster(spec)
    show(run_health(cluster, limit_names(cluster, node)), as_json)


COMMANDS = {"doctor": doctor, "validate": validate, "health": health}
