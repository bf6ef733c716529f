"""`corral plan`, `corral apply`, `corral up`, `corral trust`, `corral history`."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import typer
from rich.table import Table

from corral.cli.common import JsonOpt, SpecOpt, err, load_cluster, out, print_json
from corral.errors import UsageError
from corral.spec.cluster import Cluster

LimitOpt = typer.Option(None, "--limit", "-l", help="only these nodes (hostlist, e.g. 'gpu[01-04],ctl')")


def _limit(cluster: Cluster, limit: Optional[str]) -> Optional[list[str]]:
    if not limit:
        return None
    from corral.spec.hosts import RangeError, expand_names
    try:
        names = expand_names(limit)
    except RangeError as exc:
        raise UsageError(f"--limit: {exc}", value=limit, fix="give a hostlist like 'gpu[01-04]'") from None
    known = {n.name for n in cluster.nodes}
    unknown = [n for n in names if n not in known]
    if unknown:
        raise UsageError("--limit names nodes that are not in the spec", value=",".join(unknown),
                         fix="choose from: " + ",".join(sorted(known)))
    return names


def engine_run(cluster: Cluster, mode: str, limit: Optional[list[str]], command: str, quiet: bool):
    from corral.engine.progress import make_reporter
    from corral.workflows.converge import converge
    say = None if quiet else (lambda line: print(line, file=sys.stderr, flush=True))
    return converge(cluster, mode, limit=limit, on_event=None if quiet else make_reporter(sys.stderr),
                    command=command, say=say)


def show_warnings(result) -> None:
    for w in result.warnings:
        err.print(f"warning: {w}", style="yellow", markup=False, highlight=False)


def show_plan(result, verbose: bool = False) -> None:
    show_warnings(result)
    for name, node in result.nodes.items():
        if not node.reachable or node.error:
            out.print(f"[red]{name}: {node.error}[/red]")
            continue
        changes = [o for o in node.ops if o.status == "changed"]
        skipped = [o for o in node.ops if o.status == "unchanged" and (o.reason or "").startswith("skipped:")]
        if not changes:
            out.print(f"{name}: no change ({node.count('unchanged')} ops converged)", markup=False)
        else:
            out.print(f"{name}: {len(changes)} change(s)", markup=False)
        for op in skipped:
            out.print(f"  - {op.name}: {op.reason}", markup=False, highlight=False)
        for op in changes:
            out.print(f"  ~ {op.name}  [{op.disruption or 'none'}]", markup=False)
            if op.diff:
                for line in op.diff.splitlines()[:40]:
                    style = "green" if line.startswith("+") else "red" if line.startswith("-") else None
                    out.print(f"      {line}", style=style, markup=False, highlight=False)
            elif verbose:
                for cmd in op.commands[:6]:
                    out.print(f"      $ {cmd[:200]}", markup=False)


def show_summary(result) -> None:
    show_warnings(result)
    table = Table(title=f"{result.mode} {result.run_id} ({result.duration_s:.1f} s)")
    for col in ("node", "changed", "unchanged", "failed", "result"):
        table.add_column(col)
    for name, node in result.nodes.items():
        t = node.totals
        table.add_row(name, str(t["changed"]), str(t["unchanged"]), str(t["failed"]),
                      "ok" if node.ok else f"FAILED: {node.error}")
    out.print(table)
    for node in result.nodes.values():
        for op in node.ops:
            if op.status == "failed" and op.stderr_tail:
                err.print(f"{node.node}: {op.name}: {op.reason}\n  " +
                          op.stderr_tail.strip().replace("\n", "\n  "), markup=False)


def register(app: typer.Typer) -> None:
    @app.command("plan")
    def plan(spec: Optional[Path] = SpecOpt, limit: Optional[str] = LimitOpt, as_json: bool = JsonOpt,
             verbose: bool = typer.Option(False, "--verbose", "-v", help="show the commands too")) -> None:
        """Show, per node, what apply would change (diffs, disruption). Changes nothing."""
        cluster = load_cluster(spec)
        result = engine_run(cluster, "plan", _limit(cluster, limit), "plan", quiet=True)
        print_json(result.to_json()) if as_json else show_plan(result, verbose)
        if not result.ok:
            raise typer.Exit(1)

    @app.command("apply")
    def apply(spec: Optional[Path] = SpecOpt, limit: Optional[str] = LimitOpt,
              yes: bool = typer.Option(False, "--yes", "-y", help="apply without asking"),
              as_json: bool = JsonOpt) -> None:
        """Converge the nodes to the spec: shows the plan, asks (unless --yes), applies."""
        cluster = load_cluster(spec)
        names = _limit(cluster, limit)
        if not yes:
            if not sys.stdin.isatty():
                raise UsageError("apply needs confirmation and there is no terminal to ask on",
                                 fix="review `corral plan`, then run `corral apply --yes`")
            planned = engine_run(cluster, "plan", names, "plan", quiet=False)
            show_plan(planned)
            if planned.changed == 0 and planned.ok:
                out.print("nothing to change", markup=False)
                return
            if not typer.confirm("apply these changes?", default=False):
                raise typer.Exit(1)
        result = engine_run(cluster, "apply", names, "apply", quiet=as_json)
        print_json(result.to_json()) if as_json else show_summary(result)
        if not result.ok:
            raise typer.Exit(1)

    @app.command("up")
    def up(as_json: bool = JsonOpt) -> None:
        """The main job: virtual cluster up -> apply -> validate (the embedded default)."""
        from corral.checks.validate import validate
        from corral.cli.virtual_cmd import DEFAULT_DIR, virtual_up
        vc, rows = virtual_up(DEFAULT_DIR)
        cluster = vc.cluster
        err.print(f"virtual cluster up: {len(rows)} nodes; applying", markup=False)
        result = engine_run(cluster, "apply", None, "up", quiet=as_json)
        report = validate(cluster) if result.ok else None
        checks = report.checks if report else []
        ok = result.ok and report is not None and report.ok
        if as_json:
            print_json({"ok": ok, "spec": str(cluster.path), "apply": result.to_json(),
                        "validate": report.to_json() if report else None})
        else:
            show_summary(result)
            for c in checks:
                out.print(f"{c.status:<7} {c.name}: {c.message}", markup=False)
            if ok:
                out.print(f"\ncluster ready. Next:\n  export CORRAL_SPEC={cluster.path}\n"
                          "  corral plan            # 0 changes on a converged cluster\n"
                          "  corral virtual ssh gpu01 nvidia-smi\n  corral virtual down", markup=False)
        if not ok:
            raise typer.Exit(1)

    @app.command("trust")
    def trust(node: str = typer.Argument(..., help="node name from the spec"), spec: Optional[Path] = SpecOpt,
              replace: bool = typer.Option(False, "--replace", help="replace a pinned key that changed"),
              yes: bool = typer.Option(False, "--yes", "-y", help="pin without asking")) -> None:
        """Read a node's SSH host key, show its fingerprint and pin it in the state dir."""
        from corral.engine import hostkeys
        cluster = load_cluster(spec)
        names = _limit(cluster, node) or []
        for name in names:
            n = cluster.node(name)
            key = hostkeys.scan(n.address, cluster.spec.ssh.port)
            out.print(f"{name} ({n.address}): {hostkeys.fingerprint(key)}", markup=False)
            if not yes and not typer.confirm("does this match the node's fingerprint? pin it", default=False):
                raise typer.Exit(1)
            cluster.state_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
            hostkeys.add(hostkeys.known_hosts_path(cluster.state_dir), n.address, cluster.spec.ssh.port,
                         key, replace=replace)
            out.print(f"pinned {name}", markup=False)

    @app.command("history")
    def history(spec: Optional[Path] = SpecOpt, count: int = typer.Option(20, "--count", "-n", min=1),
                as_json: bool = JsonOpt) -> None:
        """Recent runs from the journal (time, command, spec hash, per-node outcome)."""
        from corral.engine import journal
        cluster = load_cluster(spec)
        runs = journal.recent(cluster.state_dir, limit=count)
        if as_json:
            print_json(runs)
            return
        table = Table()
        for col in ("run", "started", "command", "mode", "spec", "ok"):
            table.add_column(col)
        for r in runs:
            table.add_row(str(r.get("run_id")), str(r.get("started")), str(r.get("command")),
                          str(r.get("mode")), str(r.get("spec_hash")), "yes" if r.get("ok") else "NO")
        out.print(table)
