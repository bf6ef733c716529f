"""Results of an engine run: per node, per operation. Plain data; `to_json()` gives plain dicts."""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field

from corral.engine.handoff import Handoff

STATUSES = ("changed", "unchanged", "failed", "skipped")
# NodeResult.error_kind values
UNREACHABLE_KINDS = ("hostkey-unknown", "hostkey-changed", "auth", "refused", "timeout", "dns",
                     "connect")


@dataclass
class OpResult:
    name: str
    status: str                      # one of STATUSES; in plan mode "changed" = would change
    reason: str | None = None        # why unchanged/skipped (pyinfra's noop message), or the error
    commands: list[str] = field(default_factory=list)  # masked: secrets read *MASKED*
    rc: int | None = None            # exit status of the failing command
    stderr_tail: str = ""            # last ~20 lines of output of a failed op
    ignored: bool = False            # failed with _ignore_errors: does not fail the node
    disruption: str | None = None    # for a change: none | reconfigure | restart <daemon> | drain needed
    diff: str | None = None          # for a file change: unified diff (secrets never shown)
    duration_s: float = 0.0          # time this op took on this node (apply: executing; plan: computing)
    rollout: Handoff | None = None   # a change handed to a rollout after the components (engine/handoff.py)
    files: list[dict] = field(default_factory=list)  # the files the op installs or keeps, as it declares them
    # (deploy/installs.py), whatever its status: {"path", "sha256" (of the content; None when secret or made on the
    # node), "secret", "from_node" (its content is made on the node from what is there: an edit of the node's own file,
    # a record of its state)}. PATH.corral-block: corral's marked block in PATH. Never a secret's digest.

    def to_json(self) -> dict:
        """Every field, in order, as `dataclasses.asdict` gave it (written out: asdict deep-copies field by field,
        2.5 ms for a 4-node run's 280 ops, and a run is turned to JSON two to four times)."""
        return {"name": self.name, "status": self.status, "reason": self.reason, "commands": list(self.commands),
                "rc": self.rc, "stderr_tail": self.stderr_tail, "ignored": self.ignored,
                "disruption": self.disruption, "diff": self.diff, "duration_s": self.duration_s,
                "rollout": None if self.rollout is None else asdict(self.rollout),
                "files": [dict(f) for f in self.files]}


class TimedSteps(list):
    """The OpResults of a workflow's steps on one node (a rollout, a removal), appended as each step
    ends: each gets the time since the step before it ended (or since the list was made) as its
    duration, so the journal and `history --timing` show where a rollout's minutes went."""

    def __init__(self) -> None:
        super().__init__()
        self.mark = time.monotonic()

    def append(self, op: OpResult) -> None:
        now = time.monotonic()
        if not op.duration_s:
            op.duration_s = round(now - self.mark, 3)
        self.mark = now
        super().append(op)


@dataclass
class NodeResult:
    node: str
    address: str
    reachable: bool = True
    error: str | None = None         # one line: what failed, the value, how to fix it
    error_kind: str | None = None    # UNREACHABLE_KINDS, "op-failed", "deploy-error", "interrupted"
    ops: list[OpResult] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.reachable and self.error is None

    def count(self, status: str) -> int:
        return sum(1 for o in self.ops if o.status == status)

    @property
    def totals(self) -> dict[str, int]:
        return {s: self.count(s) for s in STATUSES}

    def to_json(self) -> dict:
        return {"node": self.node, "address": self.address, "reachable": self.reachable,
                "ok": self.ok, "error": self.error, "error_kind": self.error_kind,
                "totals": self.totals, "ops": [o.to_json() for o in self.ops]}


@dataclass
class RunResult:
    run_id: str
    command: str
    mode: str                        # "plan" | "apply"
    spec_hash: str
    started: str                     # UTC ISO 8601
    finished: str = ""
    duration_s: float = 0.0
    nodes: dict[str, NodeResult] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    rollouts: list[dict] = field(default_factory=list)  # batches of the rollouts (workflows/batches.py)
    timing: list[dict] = field(default_factory=list)  # phases in order: {name, kind, s} (engine/timing.py)

    @property
    def ok(self) -> bool:
        return all(n.ok for n in self.nodes.values())

    @property
    def totals(self) -> dict[str, dict[str, int]]:
        """Per node: {"changed": n, "unchanged": n, "failed": n, "skipped": n}."""
        return {name: n.totals for name, n in self.nodes.items()}

    @property
    def changed(self) -> int:
        return sum(n.count("changed") for n in self.nodes.values())

    @property
    def failed_nodes(self) -> list[str]:
        return [name for name, n in self.nodes.items() if not n.ok]

    def to_json(self) -> dict:
        return {"run_id": self.run_id, "command": self.command, "mode": self.mode,
                "spec_hash": self.spec_hash, "started": self.started, "finished": self.finished,
                "duration_s": round(self.duration_s, 3), "ok": self.ok, "totals": self.totals,
                "warnings": list(self.warnings), "rollouts": list(self.rollouts),
                "timing": list(self.timing),
                "nodes": {name: n.to_json() for name, n in self.nodes.items()}}
