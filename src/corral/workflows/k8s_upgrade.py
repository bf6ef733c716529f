"""The Kubernetes upgrade, declared (`KUBERNETES`) for workflows/node_rollout.py: an upgrade after an apply (scheduler: kubernetes; docs/components/kubernetes.md): the nodes
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
from typing import Any, cast

from corral.deploy.kubernetes import UPGRADE
from corral.engine.handoff import KUBERNETES as KIND
from corral.engine.results import OpResult, RunResult
from corral.engine.shell import q
from corral.errors import CorralError
from corral.facts.kubernetes import KUBECTL
from corral.render import apt
from corral.spec.cluster import Cluster
from corral.workflows import batches
from corral.workflows.k8s_node import KubeControl
from corral.workflows.node_control import why
from corral.workflows.node_rollout import DRAIN, KEEP_DRAINED, RESUME, NodeRollout, NodeRun, Rollout, Step, StepFailed

WHAT = "kubernetes upgrade"
POLL_S = 3


def install(packages: list[str], version: str) -> str:
    """The packages at `version` from pkgs.k8s.io (their holds kept), bounded."""
    install = apt.install_script([f"{p}={version}-*" for p in packages], held=True, timeout_s=300)
    return f"set -e; {install} >/dev/null; apt-mark hold {' '.join(packages)} >/dev/null"


def _on(n: NodeRun, step: str, command: str, timeout: float):
    try:
        p = n.on(command, timeout)
    except CorralError as exc:
        raise StepFailed(step, " ".join(str(exc).split())) from None
    if p.returncode != 0:
        raise StepFailed(step, f"on {n.name}: {why(p)}")
    return p


def _version(n: NodeRun) -> str:
    return n.cluster.spec.kubernetes.version


def kubeadm(n: NodeRun) -> str:
    _on(n, "kubeadm", install(["kubeadm"], _version(n)), 330)
    return f"kubeadm {_version(n)}"


def _cp(n: NodeRun) -> str:
    """The first control-plane node, where kubectl runs: this rollout runs under Kubernetes, whose
    NodeControl (spec/schedulers.py) is KubeControl."""
    return cast(KubeControl, n.control).cp


def kubeadm_upgrade(n: NodeRun) -> None:
    """`kubeadm upgrade apply` on the first control-plane node (after `plan` agrees), `node` elsewhere."""
    v = _version(n)
    if n.name == _cp(n):
        _on(n, "kubeadm upgrade apply", f"timeout 300 kubeadm upgrade plan {q('v' + v)} >/dev/null && "
            f"timeout 900 kubeadm upgrade apply -y {q('v' + v)}", 1230)
        n.ok("kubeadm upgrade apply", f"the control plane is at v{v}")
    else:
        _on(n, "kubeadm upgrade node", "timeout 600 kubeadm upgrade node", 630)
        n.ok("kubeadm upgrade node", "this node's configuration upgraded")


def kubelet(n: NodeRun) -> str:
    _on(n, "kubelet", install(["kubelet", "kubectl"], _version(n)) + "; systemctl daemon-reload; "
        "timeout 120 systemctl restart kubelet", 450)
    return f"kubelet and kubectl {_version(n)}, kubelet restarted"


def verify(n: NodeRun) -> str:
    """Ready at the new kubelet version, bounded by rollout.verify_timeout (at least 60 s)."""
    v, limit = _version(n), max(n.policy.verify_timeout, 60)
    deadline, seen = n.clock.monotonic() + limit, "no answer"
    while True:
        try:
            p = n.on(f"timeout 30 {KUBECTL} get node {q(n.name)} -o json", 45, node=_cp(n))
            item = json.loads(p.stdout) if p.returncode == 0 else {}
        except (CorralError, ValueError):
            item = {}
        kubelet_v = item.get("status", {}).get("nodeInfo", {}).get("kubeletVersion")
        ready = any(c.get("type") == "Ready" and c.get("status") == "True"
                    for c in item.get("status", {}).get("conditions") or [])
        if kubelet_v == f"v{v}" and ready:
            return f"Ready at kubelet v{v}"
        seen = f"kubelet {kubelet_v or '?'}, {'Ready' if ready else 'not Ready'}"
        if n.clock.monotonic() > deadline:
            raise StepFailed("verify", f"not Ready at v{v} after {limit} s ({seen})")
        n.clock.sleep(POLL_S)


def start(r: Rollout, result: RunResult, nodes: list[str]) -> bool:
    """Control plane first (one at a time, a failure stops everything), then the workers in batches."""
    cps = [n.name for n in r.cluster.with_role("control-plane") if n.name in nodes]
    workers = [n for n in nodes if n not in cps]
    for i, name in enumerate(cps):
        if not r.record(result, name, *r.one(name)):
            for later in cps[i + 1:] + workers:
                result.nodes[later].ops.append(OpResult(
                    name=f"{WHAT} | not started", status="skipped", disruption=UPGRADE,
                    reason=f"the control plane's upgrade stopped at {name}: this node was not changed"))
            result.warnings.append(f"{WHAT}: stopped at {name} (control plane); nothing after it was started")
            return False
    return r.batches(result, workers) if workers else True


def planned(cluster: Cluster, result, nodes: list[str], p) -> dict:
    """plan: the control-plane nodes one by one, then the workers' batches."""
    cps = [n.name for n in cluster.with_role("control-plane") if n.name in nodes]
    workers = [n for n in nodes if n not in cps]
    out: dict[str, Any] = batches.planned(WHAT, workers, p) if workers else {"what": WHAT, "state": "planned", "summary": "",
                                                               "batches": []}
    if cps:
        out["summary"] = f"control plane {' -> '.join(cps)}" + (f", then {out['summary']}" if workers else "")
        out["batches"][:0] = [{"batch": "control plane", "nodes": [n]} for n in cps]
    return out


KUBERNETES = NodeRollout(
    kind=KIND, what=WHAT, disruption=UPGRADE,
    steps=(Step("kubeadm", kubeadm), Step("kubeadm upgrade", kubeadm_upgrade), DRAIN, Step("kubelet", kubelet, changes=True),
           RESUME, Step("verify", verify)),
    reason=lambda c: "corral: kubernetes upgrade", blame=lambda c: "corral: kubernetes upgrade",
    on_failure=KEEP_DRAINED, start=start, plan=planned)
