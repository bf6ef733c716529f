"""Removed nodes around the components' run (workflows/converge.py calls `around`): the steps of
workflows/removal.py for every node in corral's record that the spec no longer has, their results as
NodeResults of the run, and the record (engine/node_record.py) written after an apply.

plan: the components' plan, plus one "remove node" op per removed node; nothing changed, nothing written.
apply: every removed node drained and waited for (in parallel) -> if one of them did not get there,
nothing else is applied (slurm.conf must not lose a node whose jobs run) -> the components -> every
removed node out of Slurm and its services stopped -> the record: finished removals dropped, unfinished
ones kept with what is left (a later apply finishes them), the spec nodes the run reached added.
With --limit, removed nodes are only named in a warning: a removal needs the controller's run.
scheduler: kubernetes: the same phases with workflows/k8s_removal.py's steps (cordon and drain, then
kubectl delete node and kubeadm reset).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from datetime import datetime, timezone

from corral.engine import journal, node_record
from corral.engine.results import NodeResult, RunResult
from corral.errors import CorralError
from corral.parallel import pmap
from corral.spec import schedulers
from corral.spec.cluster import Cluster
from corral.engine.node_record import DRAINED
from corral.workflows.removal import Run


def _removal(cluster: Cluster):
    """The removal's steps for the cluster's scheduler: Slurm's (workflows/removal.py) or Kubernetes'."""
    from corral.workflows import flows
    return flows.of(cluster).removal


def _result(cluster: Cluster, mode: str, command: str) -> RunResult:
    """The run's result when no component ran (a removal stopped the apply)."""
    now = datetime.now(timezone.utc).isoformat(timespec="seconds")
    return RunResult(run_id=uuid.uuid4().hex[:12], command=command, mode=mode, spec_hash=cluster.spec_hash(),
                     started=now, finished=now)


def _node(result: RunResult, d, ops, error: str | None) -> None:
    n = result.nodes.setdefault(d.name, NodeResult(node=d.name, address=d.address))
    n.ops.extend(ops)
    if error and n.error is None:
        n.error, n.error_kind = error, "op-failed"


def _journal(cluster: Cluster, result: RunResult) -> None:
    try:
        journal.record(cluster.state_dir, result)
    except CorralError as exc:
        result.warnings.append(f"journal not written: {exc}")


def around(cluster: Cluster, mode: str, run_components: Callable[[], RunResult], *, limit=None,
           force: bool = False, command: str = "apply", say=None, run: Run | None = None) -> RunResult:
    """`run_components()` (the engine's run of every component) with the removed nodes' steps around it."""
    record = node_record.read(cluster.state_dir)
    gone = node_record.removed(cluster, record)
    back = [n.name for n in cluster.nodes if record.get(n.name) and record[n.name].pending]
    if limit is not None or (not gone and not back) or mode == "plan":
        result = run_components()
        if gone and limit is not None:
            result.warnings.append(f"{', '.join(d.name for d in gone)}: no longer in the spec; an apply without "
                                   "--limit removes them (drain, out of Slurm, services stopped)")
        elif gone:  # plan
            r = _removal(cluster)(cluster, gone, run=run, force=force, say=say)
            for d, planned in zip(gone, pmap(r.planned, [d.name for d in gone])):
                _node(result, d, [planned], None)
            _journal(cluster, result)
        if mode == "apply":
            _save(cluster, record, result, {})
        return result
    start = time.monotonic()
    r = _removal(cluster)(cluster, gone, run=run, force=force, say=say)
    names = [d.name for d in gone]
    first = dict(zip(names, pmap(r.before, names)))
    stopped = [name for name, (_, error, _) in first.items() if error]
    if stopped:
        result = _result(cluster, mode, command)
        for d in gone:
            _node(result, d, first[d.name][0], first[d.name][1])
        result.warnings.append(f"nothing else was applied: the removal of {', '.join(stopped)} did not get past "
                               "its drain; a node with running jobs must stay in "
                               + schedulers.of(cluster).stays_in)
        # every removed node stays in the record; those Slurm knew are drained now (or were asked to be)
        _save(cluster, record, result, {n: DRAINED for n in names if first[n][2]})
    else:
        result = run_components()
        known = {name: k for name, (_, _, k) in first.items()}
        second = dict(zip(names, pmap(lambda name: r.after(name, known[name]), names)))
        for d in gone:
            ops, error, _ = second[d.name]
            _node(result, d, first[d.name][0] + ops, error)
        for name in (n for n in back if n in result.nodes):  # put back after an unfinished removal
            ops = r.lift(name)
            _node(result, cluster.node(name), ops, next((f"{name}: {o.name}: {o.reason}" for o in ops
                                                         if o.status == "failed"), None))
        _save(cluster, record, result, {name: pending for name, (_, _, pending) in second.items()})
    result.duration_s += time.monotonic() - start
    _journal(cluster, result)
    return result


def _save(cluster: Cluster, record, result: RunResult, removals: dict[str, str | None]) -> None:
    """The record after an apply; a record not written is a warning (the run happened)."""
    reached = [name for name, n in result.nodes.items() if n.reachable]
    try:
        node_record.save_if_changed(cluster.state_dir, record,
                                    node_record.updated(cluster, record, reached, removals))
    except (CorralError, OSError) as exc:
        result.warnings.append(f"record of deployed nodes not written: {exc}")
