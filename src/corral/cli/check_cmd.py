"""`corral doctor`, `corral validate`, `corral health`: one line per check, or one JSON object;
exit 1 on a failure. Module-level commands that main.py registers (COMMANDS)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from corral.checks.result import Report
from corral.cli.common import JsonOpt, SpecOpt, limit_names, load_cluster, out, print_json
from corral.errors import CorralError

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
             skip_jobs: bool = typer.Option(False, "--skip-jobs", help="read-only: submit no job"),
             timeout: Optional[int] = typer.Option(None, "--timeout", min=1, help="seconds for the whole job "
                                                   "phase (default 60; Kubernetes' GPU pods: 300): a job that has "
                                                   "not started or finished by then is cancelled and reported per node"),
             fabric: bool = typer.Option(False, "--fabric", help="also RDMA bandwidth (ib_write_bw) between node "
                                         "pairs along the topology, each against its floor")) -> None:
    """After deploy: controller, nodes, GRES, nodes reachable (SSH, slurmd, munge, Slurm's state), a
    GPU job per node, a multi-node job, accounting, a user's job, munge across nodes (and on real GPUs
    a burn and NCCL where available). Kubernetes: the API server, nodes Ready with their GPU resources, a
    GPU pod per GPU worker, DCGM series. Always a verdict: with --json always one JSON object."""
    from corral.checks.result import error_text
    from corral.checks.validate import failed
    try:
        cluster = load_cluster(spec)
    except CorralError as exc:  # a spec error: exit 2, but --json still gets its object
        if as_json:
            print_json(failed(error_text(exc)).to_json())
        raise
    try:
        from corral.workflows import flows
        bound = {"timeout_s": timeout} if timeout else {}  # else the scheduler's own default
        report = flows.of(cluster).validate(cluster, jobs=not skip_jobs, fabric=fabric, **bound)
    except CorralError as exc:  # validate() turns these into checks itself; this is the last net
        report = failed(error_text(exc, command=True), len(cluster.with_role("compute")))
    except Exception as exc:  # a bug: the JSON object still, then main() logs the traceback (exit 1)
        if as_json:
            print_json(failed(f"internal error ({type(exc).__name__}: {exc})").to_json())
        raise
    show(report, as_json)


def health(spec: Optional[Path] = SpecOpt, node: Optional[str] = typer.Option(None, "--node", "-n",
           help="only these nodes (hostlist)"), as_json: bool = JsonOpt) -> None:
    """Run the node health checks now (read-only: drains and resumes are Slurm's periodic runs)."""
    from corral.checks.health import run_health
    cluster = load_cluster(spec)
    show(run_health(cluster, limit_names(cluster, node, "--node")), as_json)


def audit(spec: Optional[Path] = SpecOpt, node: Optional[str] = typer.Option(
              None, "--node", "-n", help="only these nodes (hostlist)"), as_json: bool = JsonOpt,
          every: bool = typer.Option(False, "--all", help="list the declared entries too, each with why")) -> None:
    """Each node's attack surface, compared with what the cluster declares (read-only): listening sockets,
    root processes, setuid/setgid files, world-writable directories without the sticky bit, sudo rules, who
    may use cron and at. Exit 1 on anything undeclared, or a node that could not be audited."""
    from corral.checks.audit import audit as run_audit
    try:
        cluster = load_cluster(spec)
        result = run_audit(cluster, limit_names(cluster, node, "--node"))
    except CorralError as exc:  # a spec or usage error: exit 2, but --json still gets its object
        if as_json:
            print_json({"ok": False, "error": " ".join(str(exc).split()), "findings": None, "items": []})
        raise
    if as_json:
        print_json(result.to_json())
    else:
        for item in result.items:
            if item.declared is None:
                out.print(f"UNDECLARED {item.node} {item.kind}: {item.what}", style="red", markup=False, highlight=False)
            elif every:
                out.print(f"ok         {item.node} {item.kind}: {item.what} [{item.declared}]", markup=False,
                          highlight=False)
        for name, error in sorted(result.errors.items()):
            out.print(f"UNAUDITED  {name}: {error}", style="red", markup=False, highlight=False)
        nodes = len({i.node for i in result.items if i.node != "control host"})
        out.print(f"{len(result.items)} entries on {nodes} node(s): {len(result.findings)} undeclared"
                  + (f", {len(result.errors)} node(s) not audited" if result.errors else ""), markup=False)
    if not result.ok:
        raise typer.Exit(1)


COMMANDS = {"doctor": doctor, "validate": validate, "health": health, "audit": audit}
