"""Slurm as the rollouts (workflows/node_rollout.py) and the removal (workflows/removal.py) see one
node, asked on the controller: `SlurmNode` (the asks, mixed into Removal) and `SlurmControl`, the
NodeControl of workflows/node_control.py for a Slurm cluster.

"Slurm does not know the node" is only scontrol's own `Node X not found` (rc 1). Any other failure
(slurmctld down: another rc, an empty or garbled answer, SSH timing out) is a StepFailed before
anything is changed, never "not in Slurm" (a reboot without a drain); a failing squeue is never
"no jobs"; a drain or resume that scontrol refuses fails its step.
"""

from __future__ import annotations

import shlex
import subprocess
from typing import TYPE_CHECKING

from corral.errors import CorralError
from corral.workflows.node_control import (POLL_S, SYSTEM, Clock, NodeControl, Ok, Run, StepFailed, intervals,
                                          why as _why)

if TYPE_CHECKING:
    from corral.spec.models_rollout import RolloutPolicy

REGISTER_S = 90  # a restarted slurmd registers at once; slurmctld marks it responding then
__all__ = ["POLL_S", "REGISTER_S", "SlurmControl", "SlurmNode", "StepFailed", "_why", "control", "settle"]


class SlurmNode:
    """Mixed into SlurmControl (and workflows/removal.py's Removal), which gives `sc(command)` (run on
    the controller), `controller` and `r` (the rollout policy, spec/rules_rollout.py policy());
    `clock` is where waits are measured (the system's unless one is passed in)."""
    controller: str | None
    r: RolloutPolicy
    clock: Clock = SYSTEM

    if TYPE_CHECKING:
        def sc(self, command: str, timeout: float = 30) -> subprocess.CompletedProcess: ...

    def _ask(self, command: str):
        """(the CompletedProcess, None) or (None, why it could not be run)."""
        try:
            return self.sc(command), None
        except CorralError as exc:  # SSH to the controller failed or timed out
            return None, " ".join(str(exc).split())

    def node_reason(self, node: str) -> str | None:
        """Slurm's reason for `node`, "" without one, None when Slurm says it does not know the node;
        StepFailed when slurmctld could not be asked."""
        p, failed = self._ask(f"scontrol show node -o {shlex.quote(node)}")
        if p is not None:
            said = [line.strip() for line in (p.stdout + "\n" + p.stderr).splitlines()]
            if p.returncode == 1 and f"Node {node} not found" in said:
                return None
            if p.returncode == 0 and (p.stdout.split() or [""])[0] == f"NodeName={node}":
                return p.stdout.split(" Reason=", 1)[1].split(" [", 1)[0].strip() if " Reason=" in p.stdout else ""
            failed = _why(p) if p.returncode else f"unexpected answer: {p.stdout.strip()[:120]!r}"
        raise StepFailed("ask Slurm", f"slurmctld on {self.controller} did not answer for {node} (scontrol show "
                         f"node: {failed}): start slurmctld or fix the controller, then apply again", keep_drained=True)

    def registered(self, node: str, timeout: float = REGISTER_S, step: str = "verify") -> None:
        """Until slurmctld hears from the node's slurmd again after a reboot or a restart: not DOWN, not
        `*` or NOT_RESPONDING (a node resumed before that would get jobs it cannot start)."""
        deadline, state, waits = self.clock.monotonic() + timeout, "?", intervals()
        while True:
            p, failed = self._ask(f"scontrol show node -o {shlex.quote(node)}")
            if p is None or p.returncode != 0:  # Slurm's trouble, not the node's: no rollback for it
                raise StepFailed("ask Slurm", f"slurmctld on {self.controller} did not answer for {node} (scontrol "
                                 f"show node: {failed or _why(p)}): start slurmctld or fix the controller, then "
                                 "apply again", keep_drained=True)
            state = next((w.split("=", 1)[1] for w in p.stdout.split() if w.startswith("State=")), "?")
            if state != "?" and "*" not in state and "NOT_RESPONDING" not in state and not state.startswith("DOWN"):
                return
            if self.clock.monotonic() >= deadline:
                raise StepFailed(step, f"slurmd did not register with slurmctld within {timeout:.0f} s "
                                 f"(State={state})", keep_drained=True)
            self.clock.sleep(next(waits))

    def drain(self, node: str, reason: str) -> None:
        p, failed = self._ask(f"scontrol update nodename={shlex.quote(node)} state=drain reason={shlex.quote(reason)}")
        if p is None or p.returncode != 0:
            raise StepFailed("drain", f"slurmctld on {self.controller} did not drain {node} (scontrol update: "
                             f"{failed or _why(p)})", keep_drained=False)

    def resume(self, node: str) -> None:
        """Resume the node, then wait until slurmctld has it responding: a node resumed soon after its
        reboot can be marked NOT_RESPONDING for a moment (slurmctld pings it again); the change is done
        when the node can take jobs."""
        p, failed = self._ask(f"scontrol update nodename={shlex.quote(node)} state=resume")
        if p is None or p.returncode != 0:
            raise StepFailed("resume", f"slurmctld on {self.controller} did not resume {node} (scontrol update: "
                             f"{failed or _why(p)})", keep_drained=True)
        try:
            self.registered(node, step="resume")
        except StepFailed as exc:
            if exc.step != "resume":
                raise
            raise StepFailed("resume", f"{node} was resumed in Slurm, but {exc}: check slurmd on it",
                             keep_drained=False) from None

    def drain_and_wait(self, node: str, reason: str, ok: Ok) -> None:
        """Drain the node (a Slurm node: the caller asked node_reason first), then wait for its jobs;
        `ok(step, message)` records each step."""
        self.drain(node, reason)
        ok("drain", f"drained in Slurm ({reason})")
        self.wait_for_jobs(node)
        ok("wait for jobs", "no job running on the node")

    def running_jobs(self, node: str) -> tuple[list[str] | None, str | None]:
        """The ids of the jobs running (or completing, suspended) on the node, or (None, why squeue
        could not say): a failing squeue is never "no jobs"."""
        p, failed = self._ask(f"squeue -h -w {shlex.quote(node)} -t RUNNING,COMPLETING,SUSPENDED -o %i")
        if p is not None and p.returncode != 0:
            failed = _why(p)
        return (p.stdout.split(), None) if failed is None else (None, failed)

    def wait_for_jobs(self, node: str, *, still: str = "the node was resumed unchanged: apply again later",
                      unknown: str = "the node was not changed") -> None:
        """Until squeue answers "no job on the node"; a failing squeue is asked again until the deadline.
        `still` / `unknown`: what the caller leaves the node as when jobs still run / squeue kept failing."""
        deadline, waits = self.clock.monotonic() + self.r.drain_timeout, intervals()
        while True:
            jobs, failed = self.running_jobs(node)
            if jobs == []:
                return
            if self.clock.monotonic() >= deadline:
                if failed is not None or jobs is None:  # (None, why): squeue could not say
                    raise StepFailed("wait for jobs", f"squeue failed until the deadline ({self.r.drain_timeout} s; "
                                     f"{failed}): whether jobs run there is unknown, {unknown}; check "
                                     f"slurmctld on {self.controller}, then apply again", keep_drained=True)
                raise StepFailed("wait for jobs", f"{len(jobs)} job(s) still running after {self.r.drain_timeout} s "
                                 f"({', '.join(jobs[:5])}); {still}", keep_drained=False)
            self.clock.sleep(next(waits))


def settle(r, node: str, known: bool | None, keep: bool, ours: str, failed_reason: str) -> tuple[str, str]:
    """After a failed step: drain with `failed_reason` (keep) or lift our own drain. Returns what the
    node was left as, and why Slurm was not updated ("" when it was)."""
    resumed, note = False, ""
    try:
        if known and keep:
            r.drain(node, failed_reason[:200])
        elif known and r.node_reason(node) == ours:
            r.resume(node)
            resumed = True
    except (StepFailed, CorralError) as again:  # the controller is not answering either: change nothing more
        note = f"; Slurm not updated: {' '.join(str(again).split())}"
    if known is None:
        return "nothing changed", note
    if not known:
        return "not in Slurm", note
    return "left drained" if keep else "resumed unchanged" if resumed else "Slurm state left as it was", note


class SlurmControl(SlurmNode, NodeControl):
    """NodeControl for a Slurm cluster: drain and wait for the jobs, resume our own drain, slurmd
    registered again, a failure settled (workflows/node_control.py)."""
    resume_step = "resume"

    def __init__(self, controller: str | None, run: Run, policy: RolloutPolicy, clock: Clock = SYSTEM) -> None:
        self.controller, self.run, self.r, self.clock = controller, run, policy, clock

    def sc(self, command: str, timeout: float = 30) -> subprocess.CompletedProcess:
        if self.controller is None:  # spec/rules.py refuses a Slurm cluster without one
            raise StepFailed("ask Slurm", "the spec names no Slurm controller to ask")
        return self.run(self.controller, command, timeout)

    def known(self, node: str) -> bool:
        return self.controller is not None and self.node_reason(node) is not None

    def take_out(self, node: str, reason: str, ok: Ok) -> None:
        self.drain_and_wait(node, reason, ok)

    def put_back(self, node: str, reason: str) -> str | None:
        if self.node_reason(node) in (reason, ""):
            self.resume(node)
            return "resumed in Slurm"
        return None

    def settle(self, node: str, known: bool | None, keep: bool, reason: str, failed: str) -> tuple[str, str]:
        return settle(self, node, known, keep, reason, failed)


def control(cluster, run: Run, policy: RolloutPolicy, clock: Clock = SYSTEM) -> SlurmControl:
    """The Slurm cluster's NodeControl (spec/schedulers.py): asked on its first controller (none: no
    node is known to Slurm, nothing is drained)."""
    ctl = cluster.with_role("controller")
    return SlurmControl(ctl[0].name if ctl else None, run, policy, clock)
