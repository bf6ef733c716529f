"""MIG layout changes, carried out after every other component (and after a driver rollout), in
the batches of the rollout policy (`rollout:`, workflows/batches.py):

  drain -> wait for running jobs (bounded) -> nvidia-mig-parted apply -> verify (the node's MIG
  devices are the spec's) -> apply again for the controller and these nodes (their facts now hold
  the new MIG devices: gres.conf, slurm.conf and slurmd follow) -> resume.

Jobs still running at the deadline: resumed unchanged. A failed apply or verification, or Slurm not
following: the node stays drained with a `corral: MIG ...` reason (corral-health leaves it alone).
Slurm not answering (scontrol, squeue, a refused drain; workflows/slurm_node.py): no apply on that node.
"""

from __future__ import annotations

from collections.abc import Callable

from corral.deploy.mig import MIG_CHANGE, apply_command
from corral.engine.results import OpResult, TimedSteps, RunResult
from corral.errors import CorralError
from corral.facts.mig import COMMAND, by_gpu, split_output
from corral.workflows import batches
from corral.workflows.rollout import Rollout
from corral.workflows.slurm_node import StepFailed, settle
from corral.parallel import pmap
from corral.render.mig import wanted
from corral.spec.cluster import Cluster

OURS = "corral: MIG reconfigure"


def pending(result: RunResult) -> list[str]:
    return [name for name, n in result.nodes.items()
            if n.ok and any(o.status == "changed" and o.disruption == MIG_CHANGE for o in n.ops)]


def _op(step: str, status: str, reason: str) -> OpResult:
    return OpResult(name=f"MIG rollout | {step}", status=status, reason=reason, disruption=MIG_CHANGE)


def reconfigure(r: Rollout, name: str) -> tuple[list[OpResult], str | None]:
    """Drain, wait, apply, verify; the node is left drained for Slurm to follow (see roll_out)."""
    done: list[OpResult] = TimedSteps()
    known: bool | None = None  # None: Slurm not asked yet, or not answering (nothing changed)

    def ok(step: str, reason: str) -> None:
        done.append(_op(step, "changed", reason))
        r.say(f"node {name}: MIG rollout: {step}: {reason}")
    try:
        known = r.controller is not None and r.node_reason(name) is not None
        if known:
            r.drain_and_wait(name, OURS, ok)
        p = r.on(name, apply_command(), timeout=600)
        if p.returncode != 0:
            raise StepFailed("apply", f"nvidia-mig-parted: {(p.stderr or p.stdout).strip()[-300:]}", keep_drained=True)
        ok("apply", "nvidia-mig-parted applied the layout")
        found = by_gpu(split_output(r.on(name, COMMAND, check=True).stdout.splitlines()))
        want = wanted(r.cluster.node(name).gpus) or {}
        if found != want:
            raise StepFailed("verify", f"MIG devices {found} after the apply, expected {want}", keep_drained=True)
        ok("verify", f"{sum(len(v) for v in want.values())} MIG devices as the spec says")
        return done, None
    except (StepFailed, CorralError) as exc:
        step = exc.step if isinstance(exc, StepFailed) else "remote command"
        keep = exc.keep_drained if isinstance(exc, StepFailed) else True
        message = str(exc).replace("\n", " ")
        after, note = settle(r, name, known, keep, OURS, f"corral: MIG {step} failed: {message}")
        message += note
        done.append(_op(step, "failed", f"{message} ({after})"))
        r.say(f"node {name}: MIG rollout: {step} FAILED: {message} ({after})")
        return done, f"MIG rollout: {step} failed: {message} ({after})"


WHAT = "MIG rollout"


def roll_out(cluster: Cluster, result: RunResult, nodes: list[str], follow: Callable[[list[str]], RunResult],
             say: Callable[[str], None] | None = None) -> bool:
    """In the policy's batches (workflows/batches.py): reconfigure the nodes, then `follow` (an apply
    limited to the controller and the reconfigured nodes) so Slurm describes their new devices, then
    resume them. False when the rollout stopped early."""
    r = Rollout(cluster, say)

    def do_batch(batch: list[str]) -> list[str]:
        ready, failed = [], []
        for name, (ops, error) in zip(batch, pmap(lambda n: reconfigure(r, n), batch)):
            result.nodes[name].ops.extend(ops)
            if error:
                result.nodes[name].error, result.nodes[name].error_kind = error, "op-failed"
                failed.append(name)
            else:
                ready.append(name)
        if not ready:
            return failed
        after = follow(ready)
        for node_name, node_result in after.nodes.items():
            if node_name in result.nodes:
                result.nodes[node_name].ops.extend(
                    OpResult(name=f"after MIG | {o.name}", status=o.status, reason=o.reason,
                             disruption=o.disruption, diff=o.diff) for o in node_result.ops if o.status != "unchanged")
        for name in ready:
            fine = after.nodes.get(name) is not None and after.nodes[name].ok and all(
                n.ok for n in after.nodes.values())
            op, error = _resume(r, name, fine)
            if op is not None:
                result.nodes[name].ops.append(op)
            if error:
                result.nodes[name].error, result.nodes[name].error_kind = f"MIG rollout: {error}", "op-failed"
                failed.append(name)
        return failed
    return batches.run_batches(WHAT, nodes, r.r, do_batch, result, say, disruption=MIG_CHANGE)


def _resume(r: Rollout, name: str, fine: bool) -> tuple[OpResult | None, str | None]:
    """After the follow-up apply: resume a node we drained, or say why it stays as it is. Slurm not
    answering leaves the node as it is (drained by reconfigure) and fails it, never the whole rollout."""
    try:
        if not fine:
            why = "Slurm did not follow the new MIG devices: see the apply after the MIG rollout"
            if r.controller is not None and r.node_reason(name) is not None:
                r.drain(name, f"corral: MIG slurm failed: {why}"[:200])
            return _op("resume", "failed", f"{why} (left drained)"), why
        reason = r.node_reason(name) if r.controller is not None else None
        if reason not in (None, OURS):
            why = f"Slurm holds the node for another reason: {reason}"  # e.g. its GRES do not match
            return _op("resume", "failed", f"{why} (left as it is)"), why
        if reason == OURS:
            r.resume(name)
            r.say(f"node {name}: MIG rollout: resume: resumed in Slurm")
            return _op("resume", "changed", "resumed in Slurm"), None
        return None, None
    except (StepFailed, CorralError) as exc:
        why = f"Slurm not updated: {' '.join(str(exc).split())}"
        return _op("resume", "failed", f"{why} (left as it is)"), why
