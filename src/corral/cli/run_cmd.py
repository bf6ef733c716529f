"""`corral plan`, `corral apply`, `corral up`, `corral trust`: module-level commands
that main.py registers (COMMANDS); the work is done by workflows/ and engine/, this only renders."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Optional

import typer

from corral.cli.common import (JsonOpt, LimitOpt, OsOpt, SpecOpt, err, fingerprint_option, limit_names, load_cluster,
                               out, print_json)
from corral.errors import UsageError

if TYPE_CHECKING:
    from corral.spec.cluster import Cluster



def engine_run(cluster: Cluster, mode: str, limit: Optional[list[str]], command: str, quiet: bool,
               force: bool = False, rollout_only: Optional[list[str]] = None):
    from corral.engine.progress import make_reporter
    from corral.workflows.converge import converge
    say = None if quiet else (lambda line: print(line, file=sys.stderr, flush=True))
    return converge(cluster, mode, limit=limit, on_event=None if quiet else make_reporter(sys.stderr),
                    command=command, say=say, force=force, backup=_take_backup,
                    rollout_only=rollout_only)


def _take_backup(*args, **kwargs):
    """`corral backup` for the Slurm upgrade, imported only when an upgrade takes one (a run without an
    upgrade, every plan and almost every apply, never does)."""
    from corral.backup.take import take
    return take(*args, **kwargs)


def show_warnings(result) -> None:
    for w in result.warnings:
        err.print(f"warning: {w}", style="yellow", markup=False, highlight=False)


def show_plan(result, verbose: bool = False) -> None:
    """Per node its changes, one line each with the disruption, and what changes where the op says it in a few
    words (versions, a removal's running jobs); `verbose`: the files' unified diffs, the commands and the
    components skipped there with why. It ends with the total by disruption."""
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
        for op in skipped if verbose else ():
            out.print(f"  - {op.name}: {op.reason}", markup=False, highlight=False)
        for op in changes:
            out.print(f"  ~ {op.name}  [{op.disruption or 'none'}]", markup=False)
            if op.name == "remove node" and op.reason:  # its running jobs (workflows/removal.py)
                out.print(f"      {op.reason}", markup=False, highlight=False)
            file_diff = bool(op.diff) and op.diff.startswith("--- ")  # a file's unified diff: behind -v
            if op.diff and (verbose or not file_diff):  # else a summary (1.0-1 -> 1.1-1): always shown
                for line in op.diff.splitlines()[:40]:
                    style = "green" if line.startswith("+") else "red" if line.startswith("-") else None
                    out.print(f"      {line}", style=style, markup=False, highlight=False)
            elif verbose:
                for cmd in op.commands[:6]:
                    out.print(f"      $ {cmd[:200]}", markup=False)
    for r in result.rollouts:
        out.print(f"{r['what']}: {r['summary']}", markup=False, highlight=False)
    out.print(plan_total(result) + ("" if verbose else "  (files' diffs, commands, skipped components: -v)"),
              markup=False, highlight=False)


def plan_total(result) -> str:
    """'plan: 12 change(s) on 2 of 4 nodes (none 9, restart slurmd 2, reboot + drain 1); 1 node failed'."""
    from collections import Counter
    by = Counter(o.disruption or "none" for n in result.nodes.values() if n.reachable and not n.error
                 for o in n.ops if o.status == "changed")
    changed = sum(1 for n in result.nodes.values() if any(o.status == "changed" for o in n.ops))
    failed = sum(1 for n in result.nodes.values() if not n.reachable or n.error)
    text = f"{result.mode}: {sum(by.values())} change(s) on {changed} of {len(result.nodes)} node(s)"
    text += f" ({', '.join(f'{d} {k}' for d, k in by.most_common())})" if by else ""
    return text + (f"; {failed} node(s) failed or unreachable" if failed else "")


def show_summary(result) -> None:
    show_warnings(result)
    from rich.table import Table
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
    from corral.engine.timing import breakdown, one_line
    out.print(f"{one_line(breakdown(result.to_json()))}  (corral history --run {result.run_id} --timing)",
              markup=False, highlight=False)


def show_up(result) -> None:
    """Text for `corral up`: the apply summary, one line per check, then what to try next."""
    show_summary(result.apply)
    for c in result.checks:
        out.print(f"{c.status:<7} {c.name}: {c.message}", markup=False)
    steps = [(f"  {cmd:<23}# {note}" if len(cmd) < 23 else f"  {cmd}  # {note}") if note else f"  {cmd}"
             for cmd, note in result.next_steps()]
    if steps:
        out.print("\ncluster ready. Next:\n" + "\n".join(steps), markup=False)


def plan(spec: Optional[Path] = SpecOpt, limit: Optional[str] = LimitOpt, as_json: bool = JsonOpt,
         verbose: bool = typer.Option(False, "--verbose", "-v", help="show the diffs, the commands and the "
                                      "components skipped on each node, with why")) -> None:
    """Show, per node, what apply would change (diffs, disruption). Changes nothing."""
    cluster = load_cluster(spec)
    result = engine_run(cluster, "plan", limit_names(cluster, limit), "plan", quiet=True)
    print_json(result.to_json()) if as_json else show_plan(result, verbose)
    if not result.ok:
        raise typer.Exit(1)


def apply(spec: Optional[Path] = SpecOpt, limit: Optional[str] = LimitOpt,
          yes: bool = typer.Option(False, "--yes", "-y", help="apply without asking"),
          force: bool = typer.Option(False, "--force", help="a node taken out of the spec: cancel its running "
                                     "jobs instead of waiting for them"),
          rollout_only: Optional[str] = typer.Option(None, "--rollout-only", metavar="HOSTLIST",
                                                     help="carry out the drain/reboot rollouts on these nodes "
                                                          "only (the others stay as they are; no Slurm upgrade)"),
          as_json: bool = JsonOpt) -> None:
    """Converge the nodes to the spec: shows the plan, asks (unless --yes), applies."""
    cluster = load_cluster(spec)
    names = limit_names(cluster, limit)
    only = limit_names(cluster, rollout_only, "--rollout-only") if rollout_only is not None else None
    if not yes:
        if not sys.stdin.isatty():
            raise UsageError("apply needs confirmation and there is no terminal to ask on",
                             fix="review `corral plan`, then run `corral apply --yes`")
        planned = engine_run(cluster, "plan", names, "plan", quiet=False, force=force, rollout_only=only)
        show_plan(planned)  # the changes and their disruption; `corral plan -v` shows the diffs
        if planned.changed == 0 and planned.ok:
            out.print("nothing to change", markup=False)
            return
        if not typer.confirm("apply these changes?", default=False):
            raise typer.Exit(1)
    result = engine_run(cluster, "apply", names, "apply", quiet=as_json, force=force, rollout_only=only)
    print_json(result.to_json()) if as_json else show_summary(result)
    if not result.ok:
        raise typer.Exit(1)


def up(bundle: Optional[Path] = typer.Option(None, "--bundle", help="install every package from this bundle "
                                            "(`corral bundle build`) alone; a new spec names it"),
       fingerprint: Optional[str] = fingerprint_option("the bundle's signing key (printed by `corral bundle "
                                                       "build`); needed unless this state dir signed it"),
       os_name: Optional[str] = OsOpt, as_json: bool = JsonOpt) -> None:
    """The main job: virtual cluster up -> apply -> validate (the embedded default)."""
    from corral.cli.virtual_cmd import DEFAULT_DIR
    from corral.engine.progress import make_reporter
    from corral.workflows.up import up as run_up
    result = run_up(DEFAULT_DIR, say=lambda line: err.print(line, markup=False),
                    apply_say=None if as_json else (lambda line: print(line, file=sys.stderr, flush=True)),
                    on_event=None if as_json else make_reporter(sys.stderr), bundle=bundle, fingerprint=fingerprint,
                    os_name=os_name)
    print_json(result.to_json()) if as_json else show_up(result)
    if not result.ok:
        raise typer.Exit(1)


def trust(node: str = typer.Argument(..., help="node name from the spec (--forget: also one no longer in it)"), spec: Optional[Path] = SpecOpt,
          replace: bool = typer.Option(False, "--replace", help="replace a pinned key that changed"),
          forget: bool = typer.Option(False, "--forget", help="drop the node's pinned keys (also a node no longer "
                                      "in the spec)"),
          yes: bool = typer.Option(False, "--yes", "-y", help="pin without asking")) -> None:
    """Read a node's SSH host key, show its fingerprint and pin it in the state dir (--forget: drop it)."""
    from corral.engine import hostkeys, trust as pinning
    cluster = load_cluster(spec)
    if forget:
        return forget_keys(cluster, node, replace)
    known_hosts = hostkeys.known_hosts_path(cluster.state_dir)
    for name in limit_names(cluster, node, "NODE") or []:
        found = pinning.inspect(known_hosts, name, cluster.node(name).address, cluster.spec.ssh.port)
        out.print(found.line, markup=False)
        if not yes and not typer.confirm("does this match the node's fingerprint? pin it", default=False):
            raise typer.Exit(1)
        pinning.pin(known_hosts, found, replace=replace)
        out.print(f"pinned {name}", markup=False)


def forget_keys(cluster: Cluster, node: str, replace: bool) -> None:
    """`corral trust NODE --forget`: NODE a hostlist of nodes of the spec or of corral's record."""
    from corral.engine import trust as pinning
    from corral.spec.hosts import RangeError, expand_names
    if replace:
        raise UsageError("--forget and --replace together", fix="forget the key, or replace it: one of the two")
    try:
        names = expand_names(node)
    except RangeError as exc:
        raise UsageError(f"node: {exc}", value=node, fix="give a node name or a hostlist like 'gpu[01-04]'") from None
    for done in pinning.forget(cluster, names):
        name = done.node
        keys = ", ".join(f"{k.host} {k.fingerprint}" for k in done.keys)
        out.print(f"forgot {name}: {keys}" if keys else f"{name}: no key pinned", markup=False)
        if done.unrecorded:
            out.print(f"{name}: dropped from corral's record of deployed nodes (its services were never stopped)",
                      markup=False)


COMMANDS = {"plan": plan, "apply": apply, "up": up, "trust": trust}
