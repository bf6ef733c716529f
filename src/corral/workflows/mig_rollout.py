"""The MIG rollout, declared (`MIG`) for workflows/node_rollout.py: MIG layout changes, carried out after every other component (and after a driver rollout), in
the batches of the rollout policy (`rollout:`, workflows/batches.py):

  drain -> wait for running jobs (bounded) -> nvidia-mig-parted apply -> verify (the node's MIG
  devices are the spec's) -> apply again for the controller and these nodes (their facts now hold
  the new MIG devices: gres.conf, slurm.conf and slurmd follow) -> resume.

Jobs still running at the deadline: resumed unchanged. A failed apply or verification, or Slurm not
following: the node stays drained with a `corral: MIG ...` reason (corral-health leaves it alone).
Slurm not answering (scontrol, squeue, a refused drain; workflows/slurm_node.py): no apply on that node.
"""

from __future__ import annotations

from typing import cast

from corral.deploy.mig import MIG_CHANGE, apply_command
from corral.engine.handoff import MIG as KIND
from corral.engine.results import OpResult, RunResult
from corral.errors import CorralError
from corral.facts.mig import COMMAND, by_gpu, split_output
from corral.render.mig import wanted
from corral.workflows.node_rollout import DRAIN, RESTORE, NodeRollout, NodeRun, Rollout, Step, StepFailed
from corral.workflows.slurm_node import SlurmControl

OURS = "corral: MIG reconfigure"
WHAT = "MIG rollout"


def _op(step: str, status: str, reason: str) -> OpResult:
    return OpResult(name=f"{WHAT} | {step}", status=status, reason=reason, disruption=MIG_CHANGE)


def apply(n: NodeRun) -> str:
    p = n.on(apply_command(), timeout=600)
    if p.returncode != 0:
        raise StepFailed("apply", f"nvidia-mig-parted: {(p.stderr or p.stdout).strip()[-300:]}", keep_drained=True)
    return "nvidia-mig-parted applied the layout"


def verify(n: NodeRun) -> str:
    found = by_gpu(split_output(n.on(COMMAND, check=True).stdout.splitlines()))
    want = wanted(n.node.gpus) or {}
    if found != want:
        raise StepFailed("verify", f"MIG devices {found} after the apply, expected {want}", keep_drained=True)
    return f"{sum(len(v) for v in want.values())} MIG devices as the spec says"


def start(r: Rollout, result: RunResult, nodes: list[str]) -> bool:
    """In the policy's batches: reconfigure the nodes (left drained), then `follow` (an apply limited
    to the controller and the reconfigured nodes, converge's) so Slurm describes their new devices,
    then resume them."""
    def after(ready: list[str]) -> list[str]:
        failed = []
        assert r.env.follow is not None  # converge passes its follow-up apply to every rollout
        followed = r.env.follow(ready)
        for node_name, node_result in followed.nodes.items():
            if node_name in result.nodes:
                result.nodes[node_name].ops.extend(
                    OpResult(name=f"after MIG | {o.name}", status=o.status, reason=o.reason,
                             disruption=o.disruption, diff=o.diff) for o in node_result.ops if o.status != "unchanged")
        for name in ready:
            fine = followed.nodes.get(name) is not None and followed.nodes[name].ok and all(
                n.ok for n in followed.nodes.values())
            op, error = _resume(cast(SlurmControl, r.control), r.say, name, fine)  # MIG: Slurm's NodeControl
            if op is not None:
                result.nodes[name].ops.append(op)
            if error:
                result.nodes[name].error, result.nodes[name].error_kind = f"MIG rollout: {error}", "op-failed"
                failed.append(name)
        return failed
    return r.batches(result, nodes, after)


MIG = NodeRollout(
    kind=KIND, what=WHAT, disruption=MIG_CHANGE,
    steps=(DRAIN, Step("apply", apply, changes=True), Step("verify", verify)),  # resumed by start()
    reason=lambda c: OURS, blame=lambda c: "corral: MIG", on_failure=RESTORE, start=start)


def _resume(r: SlurmControl, say, name: str, fine: bool) -> tuple[OpResult | None, str | None]:
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
            say(f"node {name}: MIG rollout: resume: resumed in Slurm")
            return _op("resume", "changed", "resumed in Slurm"), None
        return None, None
    except (StepFailed, CorralError) as exc:
        why = f"Slurm not updated: {' '.join(str(exc).split())}"
        return _op("resume", "failed", f"{why} (left as it is)"), why
