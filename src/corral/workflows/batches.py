"""The rollout policy (`rollout:`, spec/models_rollout.py) carried out for one kind of change:
the canary batch, then batches; a stop after the batch in which the failed nodes reach `max_failed`
(after the canary at its first failure); the nodes after a stop are left untouched and in service,
each with a "not started" step saying why. Every batch is recorded in the run's result (and so in
the journal): what, which nodes, which failed, when, how long.

`do_batch(nodes)` carries the change out on the nodes of one batch (in parallel as it likes),
records their steps in the run's result itself, and returns the nodes that failed.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timezone

from corral.engine.results import OpResult, RunResult
from corral.spec.hosts import compress_names
from corral.spec.models_rollout import RolloutPolicy
from corral.workflows.node_control import SYSTEM, Clock

CANARY = "canary"


def plan(nodes: list[str], policy: RolloutPolicy) -> list[tuple[str, list[str]]]:
    """[(label, nodes)]: the canary first, then batches of policy.batch_size(len(nodes))."""
    canary, rest = nodes[:policy.canary], nodes[policy.canary:]
    size = policy.batch_size(len(nodes))
    out = [(CANARY, canary)] if canary else []
    for i in range(0, len(rest), size):
        out.append((f"batch {len(out) + 1}", rest[i:i + size]))
    return out


def describe(batches: list[tuple[str, list[str]]], policy: RolloutPolicy) -> str:
    """One line for plan: `canary gpu01 -> batch 2 gpu[02-03] -> batch 3 gpu04; stops at 1 failed node`."""
    steps = " -> ".join(f"{label} {compress_names(nodes)}" for label, nodes in batches)
    stop = f"stops at {policy.max_failed} failed node{'s' if policy.max_failed != 1 else ''}"
    return f"{steps}; {stop}" + (" (any in the canary)" if batches and batches[0][0] == CANARY else "")


def planned(what: str, nodes: list[str], policy: RolloutPolicy) -> dict:
    batches = plan(nodes, policy)
    return {"what": what, "state": "planned", "summary": describe(batches, policy),
            "batches": [{"batch": label, "nodes": names} for label, names in batches]}


def run_batches(what: str, nodes: list[str], policy: RolloutPolicy, do_batch: Callable[[list[str]], list[str]],
                result: RunResult, say: Callable[[str], None] | None = None, disruption: str | None = None,
                clock: Clock = SYSTEM) -> bool:
    """Carry `what` out batch by batch; False when the rollout stopped before its last batch."""
    say = say or (lambda line: None)
    batches = plan(nodes, policy)
    failed_total = 0
    for i, (label, batch) in enumerate(batches):
        if i and policy.pause_s:
            say(f"{what}: pause {policy.pause_s} s before the {label}")
            clock.sleep(policy.pause_s)
        say(f"{what}: {label} of {len(batches)}: {compress_names(batch)}")
        started, t0 = datetime.now(timezone.utc).isoformat(timespec="seconds"), clock.monotonic()
        failed = sorted(do_batch(batch))
        failed_total += len(failed)
        result.rollouts.append({"what": what, "state": "done", "batch": label, "nodes": batch, "failed": failed,
                                "started": started, "duration_s": round(clock.monotonic() - t0, 1)})
        stop = None
        if label == CANARY and failed:
            stop = f"the canary {compress_names(failed)} failed"
        elif failed_total >= policy.max_failed:
            stop = f"{failed_total} failed node{'s' if failed_total != 1 else ''} reached max_failed {policy.max_failed}"
        later = [n for _, names in batches[i + 1:] for n in names]
        if stop and later:
            for name in later:
                result.nodes[name].ops.append(OpResult(
                    name=f"{what} | not started", status="skipped", disruption=disruption,
                    reason=f"rollout stopped after the {label}: {stop}; this node was not changed and stays in service"))
            result.warnings.append(f"{what}: stopped after the {label} ({stop}); not started on "
                                   f"{compress_names(later)}: fix the cause, then apply again")
            say(f"{what}: STOPPED after the {label}: {stop}; {compress_names(later)} not started")
            return False
    return True


def not_started(result: RunResult, what: str) -> set[str]:
    """Nodes a stopped rollout of `what` left untouched (a later rollout leaves them alone too)."""
    return {name for name, n in result.nodes.items()
            if any(o.status == "skipped" and o.name == f"{what} | not started" for o in n.ops)}


def only(result: RunResult, what: str, nodes: list[str], chosen: set[str] | None,
         disruption: str | None = None) -> list[str]:
    """`apply --rollout-only NODES`: the pending nodes among `chosen` (all when None); the others get a
    "not started" step saying so and stay as they are."""
    if chosen is None:
        return nodes
    left = [n for n in nodes if n not in chosen]
    for name in left:
        result.nodes[name].ops.append(OpResult(name=f"{what} | not started", status="skipped", disruption=disruption,
                                               reason="not in --rollout-only: this node was not changed"))
    if left:
        result.warnings.append(f"{what}: not started on {compress_names(left)} (not in --rollout-only)")
    return [n for n in nodes if n in chosen]
