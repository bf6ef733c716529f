"""What every node workflow (the rollouts of workflows/node_rollout.py, the removals) shares: the one
failure class, the one way to run a command on a node (a `run(node, command, timeout)` callable,
passed in), the clock waits are measured on (passed in: unit tests move it, nothing sleeps), and
`NodeControl`: taking a node out of service and back, as its scheduler does it (Slurm:
workflows/slurm_node.py; Kubernetes: workflows/k8s_node.py).
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable, Iterator
from typing import Protocol

from corral.errors import NodeError

POLL_S = 2.0        # how often a long wait asks again
FIRST_POLL_S = 0.25  # a wait's first ask again: most end within a second or two


def intervals(most: float = POLL_S, first: float = FIRST_POLL_S) -> Iterator[float]:
    """The sleeps of a poll: `first`, doubling up to `most`, then `most` on. A wait that ends within a
    second or two (a node back from its reboot, slurmd registered again, a job just ending) is seen when
    it ends, not up to POLL_S later; a long one asks hardly more often than every POLL_S (three asks more
    in all)."""
    wait = first
    while True:
        yield wait
        wait = min(wait * 2, most)

Run = Callable[[str, str, float], subprocess.CompletedProcess]  # (node, command, timeout)


class StepFailed(Exception):
    """A step of a node workflow failed: its name, why, and whether the node should stay out of
    service (`keep_drained`: it may differ from before) or may go back as it was."""

    def __init__(self, step: str, message: str, keep_drained: bool = True) -> None:
        super().__init__(message)
        self.step, self.keep_drained = step, keep_drained


class Clock(Protocol):
    def monotonic(self) -> float: ...

    def sleep(self, seconds: float) -> None: ...


class SystemClock:
    """The real clock (tests pass a stand-in whose sleep moves time)."""

    def monotonic(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)


SYSTEM = SystemClock()


def why(p) -> str:
    """A failed command in one line: its exit status and the end of what it said."""
    text = " ".join((p.stderr.strip() or p.stdout.strip()).split())
    return f"rc={p.returncode}: {text[-200:] or 'no output'}"


def ssh(cluster) -> Run:
    """The run seam over SSH with the cluster's pinned keys (engine/remote.py)."""
    from corral.engine.remote import run_on
    return lambda node, command, timeout: run_on(cluster, node, command, timeout=timeout)


def checked(run: Run, node: str, command: str, timeout: float) -> subprocess.CompletedProcess:
    """`run`, a non-zero exit raised as a NodeError (as engine/remote.py's check=True)."""
    p = run(node, command, timeout)
    if p.returncode != 0:
        raise NodeError("command failed", node=node, command=command, rc=p.returncode,
                        stderr_tail="\n".join(p.stderr.strip().splitlines()[-10:]))
    return p


Ok = Callable[[str, str], None]  # ok(step, what happened): a step done, recorded on the node's result


class NodeControl(Protocol):
    """A node out of service and back, as the rollouts (workflows/node_rollout.py) call it. Each method
    raises StepFailed when its scheduler does not do it. Slurm's and Kubernetes' implementations
    subclass it, so the type checker holds them to these signatures."""
    resume_step: str   # the name of the step that puts the node back ("resume", "uncordon")

    def known(self, node: str) -> bool:
        """Whether the scheduler runs work on the node (False: nothing to take out or put back)."""
        ...

    def take_out(self, node: str, reason: str, ok: Ok) -> None:
        """Out of service with `reason`, its work ended or moved; `ok(step, what happened)` for each
        step done."""
        ...

    def put_back(self, node: str, reason: str) -> str | None:
        """Back in service if it is out for `reason` (ours): what happened, None when left as it is."""
        ...

    def registered(self, node: str) -> None:
        """Until the scheduler hears from the node again (after a reboot or a restart)."""
        ...

    def settle(self, node: str, known: bool | None, keep: bool, reason: str, failed: str) -> tuple[str, str]:
        """After a failed step: kept out with `failed` (keep) or back as it was. Returns what the node
        was left as ("" to say nothing) and a note to append to the failure ("" when none)."""
        ...
