"""A Kubernetes upgrade after an apply (scheduler: kubernetes; docs/components/kubernetes.md): the nodes
whose tools are at another version than `kubernetes.version` (deploy/kubernetes.version_pending, which
already refused skipping a minor release or going down, and checked the repository has the version).

Control plane first, one node at a time, the first control-plane node first (`kubeadm upgrade apply`,
after `kubeadm upgrade plan` agrees), the others with `kubeadm upgrade node`; a control-plane failure
stops the upgrade (no worker is started: the kubelet may not be newer than the API server). Then the
workers under the rollout policy (workflows/batches.py: a canary, batches, a stop at max_failed). On
each node, as kubeadm's upgrade guide says: kubeadm upgraded -> its `kubeadm upgrade` -> drained (from
the first control-plane node, bounded by rollout.drain_timeout) -> kubelet and kubectl upgraded (held
again), the kubelet restarted -> uncordoned -> verified: Ready at the new kubelet version (bounded by
rollout.verify_timeout, at least 60 s). A node that fails after its drain stays cordoned, saying so."""

from __future__ import annotations

import json
import time
from collections.abc import Callable

from corral.deploy.kubernetes import UPGRADE
from corral.engine.results import OpResult, RunResult, TimedSteps
from corral.engine.shell import q
from corral.errors import CorralError
from corral.parallel import pmap
from corral.render.kubernetes import first_control_plane
from corral.spec.cluster import Cluster
from corral.spec.rules_rollout import policy
from corral.facts.kubernetes import KUBECTL
from corral.workflows import batches
from corral.workflows.k8s_removal import Failed
from corral.workflows.slurm_node import _why

WHAT = "kubernetes upgrade"
POLL_S = 3


def pending(result: RunResult) -> list[str]:
    return [name for name, n in result.nodes.items()
            if n.ok and any(o.status == "changed" and o.disruption == UPGRADE for o in n.ops)]


def install(packages: list[str], version: str) -> str:
    """The packages at `version` from pkgs.k8s.io (their holds kept), bounded."""
    pins = " ".join(q(f"{p}={version}-*") for p in packages)
    return (f"set -e; export DEBIAN_FRONTEND=noninteractive; timeout 300 apt-get install -y -q "
            f"--allow-change-held-packages {pins} >/dev/null; apt-mark hold {' '.join(packages)} >/dev/null")


class Upgrade:
    def __init__(self, cluster: Cluster, run, say: Callable[[str], None]) -> None:
        self.cluster, self.run, self.say = cluster, run, say
        self.version = cluster.spec.kubernetes.version
        self.cp = first_control_plane(cluster).name
        self.policy = policy(cluster.spec)

    def _on(self, node: str, step: str, command: str, timeout: float):
        try:
            p = self.run(node, command, timeout)
        except CorralError as exc:
            raise Failed(step, " ".join(str(exc).split())) from None
        if p.returncode != 0:
            raise Failed(step, f"on {node}: {_why(p)}")
        return p

    def one(self, name: str) -> tuple[list[OpResult], str | None]:
        done: list[OpResult] = TimedSteps()
        drained = False
        v = self.version

        def ok(step: str, reason: str) -> None:
            done.append(OpResult(name=f"{WHAT} | {step}", status="changed", reason=reason, disruption=UPGRADE))
            self.say(f"node {name}: {WHAT}: {step}: {reason}")
        try:
            self._on(name, "kubeadm", install(["kubeadm"], v), 330)
            ok("kubeadm", f"kubeadm {v}")
            if name == self.cp:
                self._on(name, "kubeadm upgrade apply", f"timeout 300 kubeadm upgrade plan {q('v' + v)} >/dev/null && "
                         f"timeout 900 kubeadm upgrade apply -y {q('v' + v)}", 1230)
                ok("kubeadm upgrade apply", f"the control plane is at v{v}")
            else:
                self._on(name, "kubeadm upgrade node", "timeout 600 kubeadm upgrade node", 630)
                ok("kubeadm upgrade node", "this node's configuration upgraded")
            t = self.policy.drain_timeout
            self._on(self.cp, "drain", f"timeout {t + 30} {KUBECTL} drain {q(name)} --ignore-daemonsets "
                     f"--delete-emptydir-data --timeout={t}s", t + 45)
            drained = True
            ok("drain", "cordoned and drained")
            self._on(name, "kubelet", install(["kubelet", "kubectl"], v) + "; systemctl daemon-reload; "
                     "timeout 120 systemctl restart kubelet", 450)
            ok("kubelet", f"kubelet and kubectl {v}, kubelet restarted")
            self._on(self.cp, "uncordon", f"timeout 60 {KUBECTL} uncordon {q(name)}", 75)
            drained = False
            ok("uncordon", "back in service")
            self._verify(name)
            ok("verify", f"Ready at kubelet v{v}")
            return done, None
        except Failed as exc:
            left = "; the node stays cordoned: fix it, then apply again" if drained else ""
            done.append(OpResult(name=f"{WHAT} | {exc.step}", status="failed", reason=f"{exc}{left}",
                                 disruption=UPGRADE))
            self.say(f"node {name}: {WHAT}: {exc.step} FAILED: {exc}{left}")
            return done, f"{name}: {WHAT}: {exc.step} failed: {exc}{left}"

    def _verify(self, name: str) -> None:
        limit = max(self.policy.verify_timeout, 60)
        deadline, seen = time.monotonic() + limit, "no answer"
        while True:
            try:
                p = self.run(self.cp, f"timeout 30 {KUBECTL} get node {q(name)} -o json", 45)
                item = json.loads(p.stdout) if p.returncode == 0 else {}
            except (CorralError, ValueError):
                item = {}
            kubelet = item.get("status", {}).get("nodeInfo", {}).get("kubeletVersion")
            ready = any(c.get("type") == "Ready" and c.get("status") == "True"
                        for c in item.get("status", {}).get("conditions") or [])
            if kubelet == f"v{self.version}" and ready:
                return
            seen = f"kubelet {kubelet or '?'}, {'Ready' if ready else 'not Ready'}"
            if time.monotonic() > deadline:
                raise Failed("verify", f"not Ready at v{self.version} after {limit} s ({seen})")
            time.sleep(POLL_S)


def roll_out(cluster: Cluster, result: RunResult, nodes: list[str], say: Callable[[str], None] | None = None,
             run=None) -> bool:
    """Control plane first (one at a time, a failure stops everything), then the workers in batches."""
    from corral.engine.remote import run_on
    say = say or (lambda line: None)
    run = run or (lambda node, command, timeout: run_on(cluster, node, command, timeout=timeout))
    up = Upgrade(cluster, run, say)
    cps = [n.name for n in cluster.with_role("control-plane") if n.name in nodes]
    workers = [n for n in nodes if n not in cps]

    def record(name: str, ops: list[OpResult], error: str | None) -> bool:
        result.nodes[name].ops.extend(ops)
        if error:
            result.nodes[name].error, result.nodes[name].error_kind = error, "op-failed"
        return error is None
    for i, name in enumerate(cps):
        if not record(name, *up.one(name)):
            for later in cps[i + 1:] + workers:
                result.nodes[later].ops.append(OpResult(
                    name=f"{WHAT} | not started", status="skipped", disruption=UPGRADE,
                    reason=f"the control plane's upgrade stopped at {name}: this node was not changed"))
            result.warnings.append(f"{WHAT}: stopped at {name} (control plane); nothing after it was started")
            return False

    def do_batch(batch: list[str]) -> list[str]:
        return [n for n, r in zip(batch, pmap(up.one, batch)) if not record(n, *r)]
    return batches.run_batches(WHAT, workers, up.policy, do_batch, result, say, disruption=UPGRADE) if workers else True


def planned(cluster: Cluster, nodes: list[str]) -> dict:
    """plan: the control-plane nodes one by one, then the workers' batches."""
    p = policy(cluster.spec)
    cps = [n.name for n in cluster.with_role("control-plane") if n.name in nodes]
    workers = [n for n in nodes if n not in cps]
    out = batches.planned(WHAT, workers, p) if workers else {"what": WHAT, "state": "planned", "summary": "",
                                                               "batches": []}
    if cps:
        out["summary"] = f"control plane {' -> '.join(cps)}" + (f", then {out['summary']}" if workers else "")
        out["batches"][:0] = [{"batch": "control plane", "nodes": [n]} for n in cps]
    return out
