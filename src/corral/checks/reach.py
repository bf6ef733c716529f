"""validate's reachability pass, before any job: every compute node in parallel, each bounded
(`TIMEOUT_S`): reachable over SSH with slurmd and munge active (`systemctl is-active slurmd munge`),
and Slurm's own state of it (from the `scontrol show node -o` validate has read). Jobs are sent only
to the nodes that pass; the others are named, with why, in every job check (a job sent to a node
whose slurmd is down waits, then sticks in COMPLETING)."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field

from corral.checks.result import Check, error_text, summarize
from corral.checks.slurm_parse import available
from corral.errors import CorralError
from corral.parallel import pmap

NAME = "nodes reachable"
TIMEOUT_S = 10
SERVICES = ("slurmd", "munge")
COMMAND = "systemctl is-active slurmd munge"
SSH_FAILED = 255  # ssh's own exit status: no connection, authentication, host key

Run = Callable[..., subprocess.CompletedProcess]


@dataclass
class Reach:
    check: Check
    skipped: dict[str, str] = field(default_factory=dict)  # node -> why no job goes there
    unreachable: set[str] = field(default_factory=set)     # no SSH at all: nothing more is asked of them


def _tail(proc: subprocess.CompletedProcess) -> str:
    return ((proc.stderr or proc.stdout or "").strip().splitlines() or ["no output"])[-1][:200]


def probe(run: Run, node: str) -> tuple[str, str, str]:
    """(status, detail, short reason a job is not sent there or "") from SSH and systemd."""
    try:
        proc = run(node, COMMAND, timeout=TIMEOUT_S)
    except CorralError as exc:
        return "FAIL", f"unreachable ({error_text(exc)})", "unreachable"
    if proc.returncode == SSH_FAILED:
        return "FAIL", f"unreachable ({_tail(proc)})", "unreachable"
    states = proc.stdout.split()
    if len(states) != len(SERVICES):
        return ("FAIL", f"cannot tell whether slurmd and munge run (rc={proc.returncode}: {_tail(proc)})",
                "slurmd state unknown")
    down = [f"{svc} not running ({state})" for svc, state in zip(SERVICES, states) if state != "active"]
    if down:
        return "FAIL", ", ".join(down), down[0].split(" (")[0]
    return "OK", "slurmd and munge active", ""


def not_responding(state: str) -> bool:
    """Slurm's `*` suffix (IDLE*, DOWN*) or the NOT_RESPONDING flag: slurmctld cannot reach slurmd."""
    return state.endswith("*") or "NOT_RESPONDING" in state.upper()


def reach(run: Run, names: list[str], shown: dict[str, dict[str, str]]) -> Reach:
    """The verdict "nodes reachable" over `names` (the compute nodes), and which of them get no job."""
    if not names:
        return Reach(Check(NAME, "SKIPPED", "no compute node in the spec"))
    per_node: dict[str, tuple[str, str]] = {}
    out = Reach(Check(NAME, "SKIPPED", ""))
    for name, (status, detail, why) in zip(names, pmap(lambda n: probe(run, n), names)):
        fields = shown.get(name)
        state = fields.get("State", "UNKNOWN") if fields is not None else None
        if why == "unreachable":
            out.unreachable.add(name)
        elif state is not None and not_responding(state):
            detail = f"{detail}; " if status == "FAIL" else ""
            detail += f"not responding in Slurm ({state})"
            status, why = "FAIL", why or "not responding in Slurm"
        elif status == "OK" and state is not None:
            detail += f"; Slurm: {state}"
        if not why and fields is None:
            why = "not known to Slurm"                   # "nodes available" says so
        elif not why and fields is not None and not available(fields):
            why = f"not available in Slurm: {state}"     # drained, down: "nodes available" says why
        per_node[name] = (status, detail)
        if why:
            out.skipped[name] = why
    out.check = summarize(NAME, per_node, f"{len(names)}/{len(names)} compute nodes reachable, slurmd and "
                                          "munge active, responding in Slurm")
    return out
