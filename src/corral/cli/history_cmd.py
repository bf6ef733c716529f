"""`corral history`: the runs in the journal (engine/journal.py); `--run ID` one run per node,
`--timing` where its time went (engine/timing.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from corral.cli.common import JsonOpt, SpecOpt, err, load_cluster, out, print_json
from corral.errors import UsageError


def history(spec: Optional[Path] = SpecOpt, count: int = typer.Option(20, "--count", "-n", min=1),
            run_id: Optional[str] = typer.Option(None, "--run", metavar="ID", help="one run, node by node"),
            timing: bool = typer.Option(False, "--timing", help="where the run's time went: phases, shares, "
                                        "slowest operations (without --run: the latest run that changed anything)"),
            as_json: bool = JsonOpt) -> None:
    """Recent runs from the journal (time, command, spec hash, duration, outcome); --run ID, --timing."""
    from corral.engine import journal
    from corral.engine.timing import breakdown
    cluster = load_cluster(spec)
    if run_id is None and not timing:
        runs = journal.recent(cluster.state_dir, limit=count)
        return print_json(runs) if as_json else show_runs(runs)
    run = journal.get(cluster.state_dir, run_id) if run_id else latest_work(journal.recent(
        cluster.state_dir, limit=count, with_nodes=True))
    if run is None:
        raise UsageError(f"no run {run_id!r} in the journal" if run_id else "the journal has no run yet",
                         value=run_id or str(journal.journal_path(cluster.state_dir)),
                         fix="`corral history` lists the runs and their IDs")
    if timing:
        run["time"] = breakdown(run)
        if not run_id and not as_json:
            err.print(f"run {run['run_id']} ({run['command']}, {run['started']}): the latest that changed anything "
                      "(--run ID for another)", markup=False, highlight=False)
    if as_json:
        return print_json(run)
    show_run(run)
    if timing:
        show_timing(run["time"])


def latest_work(runs: list[dict]) -> dict | None:
    """The newest run that changed something (a no-op apply after `corral up` is not where the deploy's time
    went), else the newest run."""
    return next((r for r in runs if r.get("changed")), runs[0] if runs else None)


def show_runs(runs: list[dict]) -> None:
    from rich.table import Table
    table = Table()
    for col in ("run", "started", "command", "mode", "spec", "time", "ok"):
        table.add_column(col)
    for r in runs:
        table.add_row(str(r.get("run_id")), str(r.get("started")), str(r.get("command")), str(r.get("mode")),
                      str(r.get("spec_hash")), f"{r.get('duration_s') or 0:.1f} s", "yes" if r.get("ok") else "NO")
    out.print(table)


def show_run(run: dict) -> None:
    from rich.table import Table
    table = Table(title=f"{run['mode']} {run['run_id']} {run['started']} ({run.get('duration_s') or 0:.1f} s)")
    for col in ("node", "changed", "unchanged", "failed", "result"):
        table.add_column(col)
    for name, node in (run.get("nodes") or {}).items():
        t = node.get("totals") or {}
        table.add_row(name, str(t.get("changed", 0)), str(t.get("unchanged", 0)), str(t.get("failed", 0)),
                      "ok" if node.get("ok") else f"FAILED: {node.get('error')}")
    out.print(table)


def show_timing(time: dict) -> None:
    from rich.table import Table
    total = time["total_s"] or 1.0
    shares = Table(title=f"where {time['total_s']:.1f} s went")
    for col in ("category", "s", "share"):
        shares.add_column(col)
    for name, s in time["categories"].items():
        shares.add_row(name, f"{s:.1f}", f"{100 * s / total:.0f} %")
    out.print(shares)
    phases = Table(title="phases (a deploy's span across nodes, its slowest node)")
    for col in ("phase", "kind", "s", "slowest node"):
        phases.add_column(col)
    for p in sorted(time["phases"], key=lambda p: -p["s"])[:15]:
        phases.add_row(str(p["name"]), str(p["kind"]), f"{p['s']:.1f}", p["node"] or "")
    out.print(phases)
    ops = Table(title="slowest operations")
    for col in ("node", "operation", "s", "status", "category"):
        ops.add_column(col)
    for o in time["slowest_ops"]:
        ops.add_row(o["node"], o["op"], f"{o['s']:.1f}", o["status"], o["category"])
    out.print(ops)


COMMANDS = {"history": history}
