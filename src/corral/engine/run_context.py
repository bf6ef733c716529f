"""Everything one run keeps between its phases, in one object: `engine.runner.run` makes a fresh
`RunContext` for each run and makes it current for the run's duration; deploys, operations and the
engine reach it through `current()`.

Nothing here survives a run (the next one starts empty) and nothing is hung on pyinfra's State.
What is the same for every run (the Wants deploy modules declare when imported, see
deploy/nodestate.py `register`) is not run state and does not live here.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

WANT_FIELDS = ("paths", "services", "packages", "blocks")  # deploy/nodestate.py's Want, field by field
# the reason (after operations.skip's "skipped: ") of a change left alone on a node `apply --rollout-only`
# did not choose; workflows/node_rollout.py `held_back` finds them for the run's warning
NOT_IN_ROLLOUT = "not in this rollout (--rollout-only)"


@dataclass(eq=False)  # a run is an identity, not a value
class RunContext:
    """One run's shared state. The deploy-level values are typed loosely (`Any`): the engine sits below
    the deploys and only carries them; deploy/context.py and deploy/nodestate.py give them meaning."""

    mode: str = "plan"
    # read before the deploys are prepared (deploy/context.py's `gather` hook)
    hw: dict[str, Any] = field(default_factory=dict)          # node -> facts.records.NodeHW
    in_run: set[str] | None = None                            # reachable nodes; None: no gather hook ran
    slurm_version: tuple[int, int] | None = None              # the controllers' Slurm (major, minor)
    fabric: dict[str, str] = field(default_factory=dict)      # node -> ibnetdiscover output
    rollout_only: frozenset[str] | None = None                # apply --rollout-only NODES; None: every node
    # filled while the deploys are prepared, read while their operations generate commands
    wants: dict[str, set[str]] = field(default_factory=lambda: {f: set() for f in WANT_FIELDS})
    snapshots: dict[str, Any] = field(default_factory=dict)   # node -> deploy.nodestate.Snapshot
    package_batches: dict[str, Any] = field(default_factory=dict)  # node -> deploy.package_batch.Batch
    mount_points: dict[tuple[str, str], Any] = field(default_factory=dict)  # (node, path) -> PathState
    cuda_repo_asked: set[str] = field(default_factory=set)    # nodes where a deploy asked for NVIDIA's repo
    notes: dict[tuple[str, str], dict] = field(default_factory=dict)  # (node, op hash) -> engine/notes.py
    installs: dict[str, dict[str, tuple[Any, bool]]] = field(default_factory=dict)  # node -> path -> (content,
    # secret): what the file-writing operations prepared for it install (deploy/installs.py)

    @property
    def executing(self) -> bool:
        """True in an apply: an operation's commands run right after it generates them."""
        return self.mode == "apply"

    def outside_rollout(self, node: str) -> bool:
        """True for a node `apply --rollout-only` did not choose: a change a rollout carries out (and what
        prepares it, e.g. MIG's boot-time unit) is left as it is there (deploy/mig.py)."""
        return self.rollout_only is not None and node not in self.rollout_only


_active: list[RunContext] = []  # the current run's context on top; empty between runs


def current() -> RunContext:
    """The context of the run in progress. Raises outside a run: a deploy or operation called by
    hand (a test) makes its own with `active(RunContext())`."""
    if not _active:
        raise RuntimeError("no corral run in progress: run deploys through corral.engine.run "
                           "(or, in a test, inside `with run_context.active(RunContext()):`)")
    return _active[-1]


def in_run() -> bool:
    return bool(_active)


@contextmanager
def active(ctx: RunContext) -> Iterator[RunContext]:
    """`ctx` is the current run's context inside the block (the previous one, if any, after it)."""
    _active.append(ctx)
    try:
        yield ctx
    finally:
        _active.remove(ctx)
