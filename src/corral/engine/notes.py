"""Notes an operation attaches to its own result while it generates commands: the disruption a
change causes ("none", "reconfigure", "restart slurmd", "drain needed"), a unified diff, and the
typed hand-off to a rollout (engine/handoff.py) where the change is carried out after the components.
And one attached when the op is added: the files it installs (`declare_files`, from deploy/installs.py), which
the run's record keeps whatever the op's status.

Kept in the run's context (engine/run_context.py), keyed by (node, op hash); greenlet-safe because
each key is written by its own node's greenlet.
"""

from __future__ import annotations

from corral.engine import run_context


def annotate(*, disruption: str | None = None, diff: str | None = None, rollout=None) -> None:
    from pyinfra import host
    op_hash = getattr(host, "current_op_hash", None)
    if op_hash is None:
        return
    note = run_context.current().notes.setdefault((host.name, op_hash), {})
    if disruption is not None:
        note["disruption"] = disruption
    if diff is not None:
        note["diff"] = diff
    if rollout is not None:
        note["rollout"] = rollout


def declare_files(node: str, op_hash: str, files: list[dict]) -> None:
    """The files the op `op_hash` of `node` installs (results.OpResult.files), noted as it is added."""
    run_context.current().notes.setdefault((node, op_hash), {})["files"] = files


def take(node: str, op_hash: str) -> dict:
    return run_context.current().notes.pop((node, op_hash), {})
