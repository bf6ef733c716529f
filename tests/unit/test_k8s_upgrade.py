"""A Kubernetes minor upgrade (workflows/k8s_upgrade.py) against scripted nodes: the `run(node, command,
timeout)` seam answers as apt, kubeadm and kubectl would (kubectl's node JSON composed in the API's
format; no live cluster). The clock moves only when slept on."""

from __future__ import annotations

import json
import subprocess

import pytest

import corral.workflows.k8s_upgrade as U
from tests.unit.fakes import Clock
from corral.deploy.kubernetes import UPGRADE
from corral.engine.results import NodeResult, OpResult, RunResult
from corral.spec.loader import load
from corral.engine.handoff import KUBERNETES, Handoff
from corral.workflows import node_rollout
from corral.workflows.node_rollout import Env

CLOCK = Clock()  # the upgrade's clock: moves only when slept on


def roll_out(cluster, result, nodes, run):
    return node_rollout.roll_out(U.KUBERNETES, cluster, result, nodes, Env(run=run, clock=CLOCK))


def pending(result):
    return node_rollout.pending(result, KUBERNETES)

SPEC = """\
name: kube
scheduler: kubernetes
nodes:
  - {names: "cp[1-3]", addresses: "10.0.0.[10-12]", roles: [control-plane]}
  - {names: "gpu[01-04]", addresses: "10.0.0.[21-24]", roles: [worker], gpus: {model: h100, count: 8}}
kubernetes:
  version: 1.32.0
  control_plane_endpoint: {address: 10.0.0.5, interface: eth0}
rollout: {canary: 1, batch: 2, max_failed: 1, drain_timeout: 60, verify_timeout: 30}
"""


class Nodes:
    """Each node's kubelet version (v1.31.4 until its kubelet step), and failures by (node, step word)."""

    def __init__(self, fail: set[tuple[str, str]] = frozenset(), stuck: str | None = None) -> None:
        self.fail, self.stuck = fail, stuck
        self.kubelet: dict[str, str] = {}
        self.log: list[tuple[str, str]] = []

    def __call__(self, node, command, timeout):
        word = ("upgrade apply" if "kubeadm upgrade apply" in command else "upgrade node" if "upgrade node" in command
                else "kubelet" if "kubelet=" in command else "kubeadm" if "kubeadm=" in command else
                "drain" if " drain " in command else "uncordon" if " uncordon " in command else
                "get node" if " get node " in command else command)
        target = command.split()[-3] if word == "get node" else command.split(" drain ")[1].split()[0] if word == "drain" \
            else command.split()[-1] if word == "uncordon" else node
        self.log.append((node, f"{word} {target}" if word in ("drain", "uncordon", "get node") else word))
        if (target, word) in self.fail:
            return subprocess.CompletedProcess(command, 1, "", f"{word} failed on {target}")
        if word == "kubelet" and node != self.stuck:
            self.kubelet[node] = "v1.32.0"
        if word == "get node":
            item = {"status": {"nodeInfo": {"kubeletVersion": self.kubelet.get(target, "v1.31.4")},
                               "conditions": [{"type": "Ready", "status": "True"}]}}
            return subprocess.CompletedProcess(command, 0, json.dumps(item), "")
        return subprocess.CompletedProcess(command, 0, "", "")


@pytest.fixture
def cluster(tmp_path):
    CLOCK.now = 0.0
    path = tmp_path / "cluster.yaml"
    path.write_text(SPEC)
    return load(path)


def applied(cluster) -> RunResult:
    result = RunResult(run_id="r1", command="apply", mode="apply", spec_hash="x", started="t")
    for n in cluster.nodes:
        result.nodes[n.name] = NodeResult(n.name, n.address, ops=[
            OpResult("kubernetes node | Kubernetes version", "changed", disruption=UPGRADE,
                     rollout=Handoff(KUBERNETES, "1.31.4", "1.32.0"))])
    return result


def test_control_plane_first_one_by_one_then_workers_in_batches(cluster):
    result, nodes = applied(cluster), Nodes()
    assert pending(result) == ["cp1", "cp2", "cp3", "gpu01", "gpu02", "gpu03", "gpu04"]
    assert roll_out(cluster, result, pending(result), run=nodes)
    first = [step for node, step in nodes.log[:7]]
    assert first == ["kubeadm", "upgrade apply", "drain cp1", "kubelet", "uncordon cp1", "get node cp1", "kubeadm"]
    assert [n for n, s in nodes.log if s == "upgrade apply"] == ["cp1"]  # the others: kubeadm upgrade node
    assert [n for n, s in nodes.log if s == "upgrade node"][:2] == ["cp2", "cp3"]
    drains = [s.split()[1] for n, s in nodes.log if s.startswith("drain")]
    assert drains[:4] == ["cp1", "cp2", "cp3", "gpu01"]  # the canary after the whole control plane
    assert all(n == "cp1" for n, s in nodes.log if s.startswith(("drain", "uncordon", "get node")))
    assert [r["batch"] for r in result.rollouts] == ["canary", "batch 2", "batch 3"]
    assert result.ok and [o.name for o in result.nodes["gpu02"].ops][-6:] == [
        f"kubernetes upgrade | {s}" for s in ("kubeadm", "kubeadm upgrade node", "drain", "kubelet", "uncordon",
                                              "verify")]


def test_a_control_plane_failure_stops_everything(cluster):
    result, nodes = applied(cluster), Nodes(fail={("cp2", "upgrade node")})
    assert not roll_out(cluster, result, pending(result), run=nodes)
    assert not result.nodes["cp2"].ok and "kubeadm upgrade node failed" in result.nodes["cp2"].error
    assert "stays cordoned" not in result.nodes["cp2"].error  # it failed before its drain
    for name in ("cp3", "gpu01", "gpu04"):
        assert result.nodes[name].ops[-1].name == "kubernetes upgrade | not started"
    assert not any(n in ("cp3", "gpu01") for n, _ in nodes.log)


def test_a_failed_canary_stays_cordoned_and_stops_the_workers(cluster):
    result, nodes = applied(cluster), Nodes(fail={("gpu01", "kubelet")})
    assert not roll_out(cluster, result, pending(result), run=nodes)
    assert "stays cordoned" in result.nodes["gpu01"].error
    assert result.nodes["gpu02"].ops[-1].name == "kubernetes upgrade | not started"
    assert not any(n == "gpu02" for n, _ in nodes.log)


def test_a_kubelet_that_stays_old_fails_verify_after_the_bound(cluster):
    result, nodes = applied(cluster), Nodes(stuck="gpu01")
    assert not roll_out(cluster, result, pending(result), run=nodes)
    op = result.nodes["gpu01"].ops[-1]
    assert op.name == "kubernetes upgrade | verify" and op.status == "failed"
    assert "not Ready at v1.32.0 after 60 s (kubelet v1.31.4, Ready)" in op.reason  # at least 60 s
    assert CLOCK.monotonic() >= 60


def test_plan_shows_the_control_plane_then_the_workers_batches(cluster):
    planned = node_rollout.planned(U.KUBERNETES, cluster, applied(cluster), ["cp1", "cp2", "cp3", "gpu01", "gpu02",
                                                                            "gpu03"])
    assert planned["summary"].startswith("control plane cp1 -> cp2 -> cp3, then canary gpu01 -> batch 2 gpu[02-03]")
    assert [b["batch"] for b in planned["batches"]] == ["control plane"] * 3 + ["canary", "batch 2"]


def test_the_install_pins_each_package_to_the_version_and_keeps_the_holds():
    text = U.install(["kubelet", "kubectl"], "1.32.0")
    assert "--allow-change-held-packages kubelet=1.32.0-* kubectl=1.32.0-*" in text.replace("'", "")
    assert text.endswith("apt-mark hold kubelet kubectl >/dev/null") and "timeout 300 apt-get install" in text


def test_a_plan_names_the_upgrade_rollout(cluster):
    from corral.workflows.converge import show_rollouts
    result = applied(cluster)
    show_rollouts(cluster, result)
    assert [r["what"] for r in result.rollouts] == ["kubernetes upgrade"]
    assert result.rollouts[0]["summary"].startswith("control plane cp1 -> cp2 -> cp3, then canary gpu01")
