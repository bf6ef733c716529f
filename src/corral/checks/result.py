"""Structured check results shared by doctor, validate and health: the CLI only renders them."""

from __future__ import annotations

from dataclasses import dataclass, field

from corral.errors import CorralError

STATUSES = ("OK", "WARN", "FAIL", "SKIPPED")


@dataclass
class Check:
    name: str
    status: str                      # OK | WARN | FAIL | SKIPPED
    message: str
    nodes: dict[str, str] = field(default_factory=dict)  # per-node detail

    @property
    def ok(self) -> bool:
        return self.status != "FAIL"

    def to_json(self) -> dict:
        return {"name": self.name, "status": self.status, "message": self.message, "nodes": self.nodes}


def summarize(name: str, per_node: dict[str, tuple[str, str]], ok_message: str) -> Check:
    """One check from per-node (status, detail): the worst status wins; failures are named."""
    order = {s: i for i, s in enumerate(("OK", "SKIPPED", "WARN", "FAIL"))}
    worst = max((s for s, _ in per_node.values()), key=order.__getitem__, default="SKIPPED")
    bad = [f"{n}: {d}" for n, (s, d) in sorted(per_node.items()) if s in ("FAIL", "WARN")]
    message = "; ".join(bad) if bad else ok_message
    return Check(name, worst, message, {n: f"{s}: {d}" for n, (s, d) in sorted(per_node.items())})


def error_text(exc: CorralError, *, command: bool = False) -> str:
    """An error on one line, for a check's message; `command`: also the start of the command that
    failed, when the error says (a NodeError: where it ran, what timed out)."""
    text = " ".join(str(exc).split())
    ran = getattr(exc, "command", None)
    if command and ran:
        first = " ".join(str(ran).split())
        text += f" (running: {first[:80]}{'...' if len(first) > 80 else ''})"
    return text


@dataclass
class Report:
    checks: list[Check] = field(default_factory=list)
    extra: dict = field(default_factory=dict)  # e.g. the DeepOps validate_slurm.py contract fields

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.checks)

    @property
    def failures(self) -> list[str]:
        return [f"{c.name}: {c.message}" for c in self.checks if c.status == "FAIL"]

    def to_json(self) -> dict:
        return {"ok": self.ok, "failures": self.failures, **self.extra,
                "checks": [c.to_json() for c in self.checks]}
