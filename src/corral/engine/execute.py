"""Plan (compute what would change, change nothing) and apply (execute) the ops of a prepared State.

Both run every node in parallel (pyinfra's gevent pool) and never let one node's error stop the
others: pyinfra's `run_ops` re-raises any exception escaping an op on one host (a template error,
a fact that raises) and so aborts the whole run, hence this loop around pyinfra's `run_host_op`.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import gevent
import gevent.event
import gevent.lock
from corral.engine import pyinfra_seam as seam
from corral.engine.chain import chained
from corral.engine.conditions import AnyChanged

if TYPE_CHECKING:
    from corral.engine.runner import Run

TAIL = 20
EARLIER = "not run: the node failed earlier"


def _error_text(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}".strip()


def _plan_if(conditions) -> bool | None:
    """Evaluate an op's `_if` without executing anything: True, False, or None (unknowable)."""
    if conditions is None:
        return True
    result: bool | None = True
    for cond in conditions if isinstance(conditions, list) else [conditions]:
        owner, func = getattr(cond, "__self__", None), getattr(cond, "__func__", None)
        value: bool | None = None
        if isinstance(cond, AnyChanged):
            value = cond.planned()
        elif isinstance(owner, seam.OperationMeta):
            if func is seam.OperationMeta.did_change:
                value = owner.will_change
            elif func is seam.OperationMeta.did_not_change:
                value = not owner.will_change
            elif func is seam.OperationMeta.did_succeed:
                value = True
        if value is False:
            return False
        if value is None:
            result = None
    return result


def _plan_host(run: Run, host) -> None:
    state = run.state
    with seam.on_host(host):
        for op_hash in list(seam.op_hashes(host)):
            if host in state.failed_hosts:
                run.record(host, op_hash, "skipped", reason=EARLIER)
                continue
            op_data = seam.op_data(state, host, op_hash)
            cond = _plan_if(op_data.global_arguments.get("_if"))
            if cond is False:
                seam.set_planned_change(op_data.operation_meta, False)
                run.record(host, op_hash, "unchanged",
                           reason="its condition (_if) is false: the op it depends on would not change")
                continue
            since = time.monotonic()
            try:
                commands = list(op_data.command_generator())
            except Exception as exc:  # noqa: BLE001
                run.op_failed(host, op_hash, _error_text(exc), duration=time.monotonic() - since)
                continue
            took = time.monotonic() - since
            if host in state.failed_hosts:  # a fact could not be read
                run.op_failed(host, op_hash, run.host_messages(host) or "a fact could not be read", duration=took)
                continue
            seam.set_planned_change(op_data.operation_meta, bool(commands))
            if commands:
                reason = "if its condition holds at apply time" if cond is None else None
                run.record(host, op_hash, "changed", reason=reason, commands=commands, duration=took)
            else:
                run.record(host, op_hash, "unchanged", duration=took)


def plan(run: Run) -> None:
    hosts = [h for h in run.state.inventory if h in run.state.active_hosts]
    since = time.monotonic()
    with seam.as_state(run.state):
        gevent.joinall([run.state.pool.spawn(_plan_host, run, h) for h in hosts])
    run.timed("plan", "deploy", since, deploys=None)  # one phase: every node computes all its ops at once


def _apply_one(run: Run, host, op_hash: str) -> None:
    state = run.state
    run.capture.rc.pop(host.name, None)
    op_data = seam.op_data(state, host, op_hash)
    if not getattr(op_data.command_generator, "corral_chained", False):  # one round trip per run of commands
        op_data.command_generator = chained(op_data.command_generator)
    since = time.monotonic()
    with seam.on_host(host):
        try:
            ok = seam.run_host_op(state, host, op_hash)
            error = None
        except Exception as exc:  # noqa: BLE001 - one node's error must not stop the others
            ok, error = False, _error_text(exc)
    took = time.monotonic() - since
    meta = op_data.operation_meta
    commands = seam.op_commands(meta)
    fact_failed = host in state.failed_hosts  # pyinfra fails the host when a fact cannot be read
    if ok and not fact_failed and meta.is_complete() and meta.did_succeed():
        reason = None
        if not commands and _applied_if(op_data.global_arguments.get("_if")) is False:
            reason = "its condition (_if) is false: the op it depends on did not change"
        run.record(host, op_hash, "changed" if commands else "unchanged", reason=reason,
                   commands=commands, duration=took)
        return
    output = seam.op_output(meta)
    lines = (output.stderr_lines or output.stdout_lines) if output is not None else []
    tail = "\n".join(lines[-TAIL:])
    rc = run.capture.rc.get(host.name)
    if ok and not fact_failed:  # failed but _ignore_errors
        run.record(host, op_hash, "failed", reason="error ignored (_ignore_errors)",
                   commands=commands, rc=rc, stderr=tail, ignored=True, duration=took)
        return
    if fact_failed:
        error = run.host_messages(host) or error or "a fact could not be read"
    elif error is None and rc not in (None, 0):
        error = f"command exited with status {rc}" + (f": {lines[-1].strip()}" if lines else "")
    elif error is None:
        error = run.host_messages(host) or "the operation failed"
    run.op_failed(host, op_hash, error, commands=commands, rc=rc, stderr=tail, duration=took)


def _applied_if(conditions) -> bool | None:
    """After execution: the value of an op's `_if` when it only asks earlier ops (did_change...);
    None when there is none or it is an arbitrary callable (not called twice: it may run facts)."""
    if conditions is None:
        return None
    items = conditions if isinstance(conditions, list) else [conditions]
    if not all(isinstance(c, AnyChanged) or isinstance(getattr(c, "__self__", None), seam.OperationMeta)
               for c in items):
        return None
    try:
        return all(bool(c()) for c in items)
    except Exception:  # noqa: BLE001
        return None


def apply(run: Run) -> None:
    """Each node runs its deploys in order, its ops one after the other, independently of the other
    nodes, except where a deploy waits for earlier ones (`run.waits`, from the components' declarations: e.g.
    slurmd's deploy for the controller's): it starts once they are done on every node that had ops
    in them. A deploy with no declared waits waits for all earlier ones (a barrier).

    pyinfra identifies ops across hosts by position, so ops of different deploys on different
    nodes can share a hash: the order comes from what each node's deploys added (`run.phases`).
    Journaled per deploy: when its first node started it (`start`, s after the apply began), its
    span to the last node's end (`s`), and what each node waited for others before it (`waited`).
    """
    state = run.state
    seam.mark_executing(state)
    hosts = [h for h in state.inventory if h in state.activated_hosts and run.phases.get(h.name)]
    count = max((len(run.phases[h.name]) for h in hosts), default=0)
    left = [sum(1 for h in hosts if i < len(run.phases[h.name]) and run.phases[h.name][i]) for i in range(count)]
    done = [gevent.event.Event() for _ in range(count)]
    for i, n in enumerate(left):
        if n == 0:
            done[i].set()
    slots = gevent.lock.BoundedSemaphore(state.pool.size or max(len(hosts), 1))
    began = time.monotonic()
    first: dict[int, float] = {}
    last: dict[int, float] = {}
    waited: dict[int, dict[str, float]] = {}

    def ops_of(host, op_hashes: list[str]) -> None:
        for op_hash in op_hashes:
            if host in state.failed_hosts:
                run.record(host, op_hash, "skipped", reason=EARLIER)
            else:
                _apply_one(run, host, op_hash)

    def finish(i: int) -> None:
        last[i] = time.monotonic()
        left[i] -= 1
        if left[i] == 0:
            done[i].set()

    def one_node(host) -> None:
        todo = [i for i, op_hashes in enumerate(run.phases[host.name]) if op_hashes]
        try:
            while todo:
                i = todo[0]
                wait = run.waits[i] if i < len(run.waits) else None
                deps = wait if wait is not None else range(i)
                since = time.monotonic()
                for d in deps:
                    done[d].wait()
                if time.monotonic() - since >= 0.01:
                    waited.setdefault(i, {})[host.name] = round(time.monotonic() - since, 3)
                first.setdefault(i, time.monotonic())
                try:
                    with slots:  # as many nodes at once as pyinfra's pool allows, and only while running ops
                        ops_of(host, run.phases[host.name][i])
                except Exception as exc:  # noqa: BLE001 - an engine bug on one node: it fails, the others go on
                    node = run.node(host.name)
                    if node.error is None:
                        node.error, node.error_kind = f"{host.name}: {_error_text(exc)}", "engine-error"
                    state.failed_hosts.add(host)  # its later ops are recorded as not run
                finally:
                    todo.pop(0)
                    finish(i)
        finally:  # whatever happened here, no other node waits for this one forever
            for i in todo:
                finish(i)

    with seam.as_state(state):
        gevent.joinall([gevent.spawn(one_node, h) for h in hosts])
    for i in sorted(first):
        name = run.deploy_names[i] if i < len(run.deploy_names) else f"deploy {i + 1}"
        run.result.timing.append({"name": name, "kind": "deploy", "s": round(last[i] - first[i], 3),
                                  "start": round(first[i] - began, 3), "waited": waited.get(i, {})})
