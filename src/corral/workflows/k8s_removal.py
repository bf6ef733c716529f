"""A node taken out of a Kubernetes spec (scheduler: kubernetes): the steps workflows/removal_phase.py
runs around the components, with the same interface as workflows/removal.py's Removal (Slurm).

  plan:   one op, "remove node" [drain + remove from Kubernetes], with the node's pods (DaemonSets' aside).
  before: cordon, marked with the annotation corral.dev/removing (so a node put back is uncordoned only
          when the cordon was corral's) -> `kubectl drain` (DaemonSets ignored, emptyDir data deleted;
          --force: also pods no controller manages, and PodDisruptionBudgets bypassed), bounded by
          `rollout.drain_timeout`. A drain that did not finish stops the apply: the node stays cordoned.
  after:  `kubectl delete node` -> on the node, `kubeadm reset -f` (a control-plane node leaves etcd) and
          the kubelet stopped and disabled. Its data, packages and containerd stay.

Every command runs on the first control-plane node of the spec, or on the removed node at its recorded
address, through the seam `run(node, command, timeout)` (SSH by default)."""

from __future__ import annotations

import json
from collections.abc import Callable

from corral.engine.node_record import DRAINED, SERVICES_LEFT, Deployed
from corral.engine.results import OpResult, TimedSteps
from corral.engine.shell import q
from corral.errors import CorralError
from corral.render.kubernetes import first_control_plane
from corral.spec.cluster import Cluster
from corral.facts.kubernetes import KUBECTL
from corral.workflows.removal import Run, drain_timeout_s, ssh_run
from corral.workflows.node_control import StepFailed, why as _why

DISRUPTION = "drain + remove from Kubernetes"
ANNOTATION = "corral.dev/removing"
RESET = ("rc=0; if command -v kubeadm >/dev/null; then timeout 120 kubeadm reset -f >/dev/null 2>&1 || "
         "{ rc=$?; echo \"kubeadm reset -f failed (exit $rc)\" >&2; }; fi; "
         "systemctl disable --now kubelet.service >/dev/null 2>&1; "
         "if systemctl is-active --quiet kubelet.service; then echo 'kubelet still active' >&2; exit 1; fi; exit $rc")


def op(step: str, status: str, reason: str, disruption: str = DISRUPTION) -> OpResult:
    return OpResult(name=f"remove node | {step}" if step else "remove node", status=status, reason=reason,
                    disruption=disruption)




class K8sRemoval:
    def __init__(self, cluster: Cluster, gone: list[Deployed], *, run: Run | None = None, force: bool = False,
                 say: Callable[[str], None] | None = None) -> None:
        self.cluster, self.gone, self.force = cluster, {d.name: d for d in gone}, force
        self.say = say or (lambda line: None)
        self.cp = first_control_plane(cluster).name
        self.timeout = drain_timeout_s(cluster)
        self.run = run or ssh_run(cluster, gone)

    def _kubectl(self, step: str, args: str, timeout: float = 60):
        try:
            return self.run(self.cp, f"timeout {int(timeout)} {KUBECTL} {args}", timeout + 15)
        except CorralError as exc:
            raise StepFailed(step, f"{self.cp} could not be asked: {' '.join(str(exc).split())}") from None

    def known(self, name: str, step: str = "ask Kubernetes") -> bool:
        p = self._kubectl(step, f"get node {q(name)} -o name")
        if p.returncode == 0:
            return True
        if "NotFound" in p.stderr or "not found" in p.stderr:
            return False
        raise StepFailed(step, f"the API server on {self.cp} did not answer ({_why(p)})")

    def _pods(self, name: str) -> int | None:
        p = self._kubectl("pods", f"get pods -A --field-selector spec.nodeName={q(name)} -o json")
        try:
            items = json.loads(p.stdout)["items"] if p.returncode == 0 else None
        except (ValueError, KeyError):
            items = None
        if items is None:
            return None
        return sum(1 for i in items if not any(o.get("kind") == "DaemonSet"
                                               for o in i.get("metadata", {}).get("ownerReferences") or []))

    def planned(self, name: str) -> OpResult:
        try:
            if not self.known(name):
                return op("", "changed", "Kubernetes does not know it: apply runs kubeadm reset on it (its data "
                                         "stays)", "kubeadm reset")
            pods = self._pods(name)
        except StepFailed as exc:
            return op("", "changed", f"its pods unknown ({exc}); apply drains it first")
        count = "its pods unknown" if pods is None else f"{pods} pod(s) besides DaemonSets'"
        how = "evicting even unmanaged pods (--force)" if self.force else f"waiting up to {self.timeout} s"
        return op("", "changed", f"{count}: apply cordons and drains it ({how}), deletes it from the cluster, "
                                 "then runs kubeadm reset on it (its data stays)")

    def _step(self, name: str, done: list, step: str, status: str, reason: str) -> None:
        done.append(op(step, status, reason))
        self.say(f"node {name}: remove: {step}{' FAILED' if status == 'failed' else ''}: {reason}")

    def before(self, name: str) -> tuple[list[OpResult], str | None, bool]:
        done: list[OpResult] = TimedSteps()
        known = False
        try:
            known = self.known(name)
            if not known:
                return done, None, False
            p = self._kubectl("cordon", f"annotate node {q(name)} --overwrite {ANNOTATION}=true")
            if p.returncode != 0:
                raise StepFailed("cordon", f"kubectl annotate failed ({_why(p)})")
            force = " --force --disable-eviction" if self.force else ""
            self.say(f"node {name}: remove: draining (up to {self.timeout} s)")
            p = self._kubectl("drain", f"drain {q(name)} --ignore-daemonsets --delete-emptydir-data{force} "
                                       f"--timeout={self.timeout}s", timeout=self.timeout + 30)
            if p.returncode != 0:
                raise StepFailed("drain", f"kubectl drain did not finish ({_why(p)}); the node stays cordoned and in the "
                             "cluster; nothing else was applied: apply again, or with --force")
            self._step(name, done, "drain", "changed", "cordoned and drained (DaemonSets' pods aside)")
            return done, None, True
        except StepFailed as exc:
            self._step(name, done, exc.step, "failed", str(exc))
            return done, f"{name}: removal: {exc.step} failed: {exc}", known

    def after(self, name: str, known: bool) -> tuple[list[OpResult], str | None, str | None]:
        done: list[OpResult] = TimedSteps()
        try:
            if known:
                p = self._kubectl("delete node", f"delete node {q(name)} --ignore-not-found")
                if p.returncode != 0:
                    raise StepFailed("delete node", f"kubectl delete node failed ({_why(p)}); it stays cordoned: apply "
                                 "again")
                self._step(name, done, "delete node", "changed", "deleted from the cluster")
        except StepFailed as exc:
            self._step(name, done, exc.step, "failed", str(exc))
            return done, f"{name}: removal: {exc.step} failed: {exc}", DRAINED
        try:
            p = self.run(name, RESET, 180)
            why = None if p.returncode == 0 else _why(p)
        except CorralError as exc:
            why = " ".join(str(exc).split())
        if why:
            why = f"{SERVICES_LEFT}: {why}; when it is back, apply again resets it"
            self._step(name, done, "kubeadm reset", "failed", why)
            return done, f"{name}: removal: kubeadm reset failed: {why}", SERVICES_LEFT
        self._step(name, done, "kubeadm reset", "changed", "kubeadm reset -f; kubelet stopped and disabled; data, "
                                                           "packages and containerd left")
        return done, None, None

    def lift(self, name: str) -> list[OpResult]:
        """A node back in the spec that an unfinished removal left cordoned: uncordoned when the cordon was
        corral's (the annotation), the annotation removed."""
        try:
            p = self._kubectl("uncordon", f"get node {q(name)} -o json")
            if p.returncode != 0 or ANNOTATION not in json.loads(p.stdout).get("metadata", {}).get("annotations", {}):
                return []
            u = self._kubectl("uncordon", f"uncordon {q(name)}")
            a = self._kubectl("uncordon", f"annotate node {q(name)} {ANNOTATION}-")
            if u.returncode != 0 or a.returncode != 0:
                raise StepFailed("uncordon", f"kubectl uncordon failed ({_why(u if u.returncode else a)})")
        except (StepFailed, ValueError) as exc:
            why = f"{exc}; it stays cordoned: `kubectl uncordon {name}` on {self.cp}"
            return [OpResult(name="back in the spec | uncordon", status="failed", reason=why)]
        self.say(f"node {name}: back in the spec: uncordoned")
        return [OpResult(name="back in the spec | uncordon", status="changed", reason="corral's cordon lifted")]
