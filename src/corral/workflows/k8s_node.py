"""Kubernetes as the rollouts (workflows/node_rollout.py) see one node: cordoned and drained (its
pods evicted, bounded by rollout.drain_timeout) and uncordoned with kubectl on the first
control-plane node. The NodeControl of workflows/node_control.py for `scheduler: kubernetes`."""

from __future__ import annotations

import subprocess
from typing import TYPE_CHECKING

from corral.engine.shell import q
from corral.errors import CorralError
from corral.facts.kubernetes import KUBECTL
from corral.workflows.node_control import Clock, NodeControl, Ok, Run, StepFailed, why

if TYPE_CHECKING:
    from corral.spec.models_rollout import RolloutPolicy


class KubeControl(NodeControl):
    resume_step = "uncordon"

    def __init__(self, cp: str, run: Run, policy: RolloutPolicy) -> None:
        self.cp, self.run, self.policy = cp, run, policy
        self.cordoned: set[str] = set()

    def kubectl(self, step: str, args: str, timeout: float) -> subprocess.CompletedProcess:
        """kubectl on the first control-plane node; StepFailed when it cannot be run or fails."""
        try:
            p = self.run(self.cp, f"timeout {int(timeout)} {KUBECTL} {args}", timeout + 15)
        except CorralError as exc:
            raise StepFailed(step, " ".join(str(exc).split())) from None
        if p.returncode != 0:
            raise StepFailed(step, f"on {self.cp}: {why(p)}")
        return p

    def known(self, node: str) -> bool:
        return True  # every node of the cluster runs pods (a join left pending is not upgraded)

    def take_out(self, node: str, reason: str, ok: Ok) -> None:
        t = self.policy.drain_timeout
        self.kubectl("drain", f"drain {q(node)} --ignore-daemonsets --delete-emptydir-data --timeout={t}s", t + 30)
        self.cordoned.add(node)
        ok("drain", "cordoned and drained")

    def put_back(self, node: str, reason: str) -> str | None:
        self.kubectl("uncordon", f"uncordon {q(node)}", 60)
        self.cordoned.discard(node)
        return "back in service"

    def registered(self, node: str) -> None:
        """The rollout's verify step waits for Ready itself (workflows/k8s_upgrade.py)."""

    def settle(self, node: str, known: bool | None, keep: bool, reason: str, failed: str) -> tuple[str, str]:
        """Nothing is changed after a failure: a cordoned node stays cordoned, saying so."""
        return "", ("; the node stays cordoned: fix it, then apply again" if node in self.cordoned else "")


def control(cluster, run: Run, policy: RolloutPolicy, clock: Clock | None = None) -> KubeControl:
    """The Kubernetes cluster's NodeControl (spec/schedulers.py): kubectl on the first control-plane
    node (the clock is not needed: kubectl drain bounds its own wait)."""
    from corral.render.kubernetes import first_control_plane
    return KubeControl(first_control_plane(cluster).name, run, policy)
