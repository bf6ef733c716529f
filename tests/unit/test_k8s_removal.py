"""Taking a worker out of a Kubernetes spec (workflows/k8s_removal.py through removal_phase.py) against a
scripted control plane and node: the `run(node, command, timeout)` seam answers as kubectl and the
node's reset would (composed in kubectl's formats; no live cluster)."""

from __future__ import annotations

import json
import shlex
import subprocess

from corral.engine import node_record
from corral.engine.node_record import DRAINED, SERVICES_LEFT, Deployed
from corral.engine.results import NodeResult, OpResult, RunResult
from corral.errors import NodeError
from corral.spec.loader import load
from corral.workflows import removal_phase
from corral.workflows.k8s_removal import ANNOTATION, DISRUPTION, RESET, K8sRemoval

SPEC = """\
name: kube
scheduler: kubernetes
nodes:
  - {names: cp1, addresses: [10.0.0.10], roles: [control-plane]}
  - {names: "gpu[01-02]", addresses: "10.0.0.[11-12]", roles: [worker], gpus: {model: h100, count: 2}}
rollout: {drain_timeout: 60}
"""
GPU03 = Deployed("gpu03", "10.0.0.13", ("worker",), 22, "root")
PODS = {"items": [
    {"metadata": {"name": "train-0", "ownerReferences": [{"kind": "StatefulSet"}]}},
    {"metadata": {"name": "nvidia-dcgm-exporter-x", "ownerReferences": [{"kind": "DaemonSet"}]}},
    {"metadata": {"name": "notebook"}}]}


class Fake:
    """cp1 (the API server's view of gpu03) and gpu03."""

    def __init__(self, known=True, drain_rc=0, reset=(0, "", ""), annotated=False):
        self.known, self.drain_rc, self.reset, self.annotated = known, drain_rc, reset, annotated
        self.log: list[str] = []

    def __call__(self, node, command, timeout):
        rc, out, err = self.answer(node, command)
        return subprocess.CompletedProcess(command, rc, out, err)

    def answer(self, node, command):
        if node == "gpu03":
            assert command == RESET
            self.log.append("reset")
            if isinstance(self.reset, Exception):
                raise self.reset
            return self.reset
        assert node == "cp1", (node, command)
        word = shlex.split(command)[5:]  # after `timeout N kubectl --kubeconfig admin.conf`
        self.log.append(" ".join(word[:2]))
        if word[:2] == ["get", "node"]:
            if not self.known:
                return 1, "", 'Error from server (NotFound): nodes "gpu03" not found\n'
            annotations = {ANNOTATION: "true"} if self.annotated else {}
            return 0, json.dumps({"metadata": {"name": "gpu03", "annotations": annotations}}) if "json" in word else \
                "node/gpu03\n", ""
        if word[:2] == ["get", "pods"]:
            return 0, json.dumps(PODS), ""
        if word[:2] == ["annotate", "node"]:
            self.annotated = not word[-1].endswith("-")
            return 0, "", ""
        if word[0] == "drain":
            self.log[-1] = " ".join(w for w in word if w in ("drain", "--force", "--disable-eviction"))
            return self.drain_rc, "", "error: unable to drain node \"gpu03\" due to error: timed out" if self.drain_rc else ""
        if word[:2] == ["delete", "node"]:
            self.known = False
            return 0, "", ""
        if word[0] == "uncordon":
            return 0, "", ""
        raise AssertionError(command)


def cluster(tmp_path):
    path = tmp_path / "cluster.yaml"
    path.write_text(SPEC)
    return load(path)


def recorded(c, *extra: Deployed) -> None:
    node_record.write(c.state_dir, {n.name: node_record.entry(c, n) for n in c.nodes} | {d.name: d for d in extra})


def components(c, calls, fake):
    def run() -> RunResult:
        calls.append(list(fake.log))
        result = RunResult(run_id="r1", command="apply", mode="apply", spec_hash="x", started="t")
        for n in c.nodes:
            result.nodes[n.name] = NodeResult(n.name, n.address, ops=[OpResult("base | x", "unchanged")])
        return result
    return run


def test_plan_counts_the_pods_besides_daemonsets_and_changes_nothing(tmp_path):
    c, fake = cluster(tmp_path), Fake()
    planned = K8sRemoval(c, [GPU03], run=fake).planned("gpu03")
    assert (planned.name, planned.status, planned.disruption) == ("remove node", "changed", DISRUPTION)
    assert planned.reason.startswith("2 pod(s) besides DaemonSets': apply cordons and drains it (waiting up to 60 s)")
    assert fake.log == ["get node", "get pods"] and not fake.annotated
    assert K8sRemoval(c, [GPU03], run=Fake(known=False)).planned("gpu03").disruption == "kubeadm reset"


def test_apply_drains_first_then_deletes_and_resets_and_forgets_the_node(tmp_path):
    c, fake, calls = cluster(tmp_path), Fake(), []
    recorded(c, GPU03)
    result = removal_phase.around(c, "apply", components(c, calls, fake), run=fake)
    assert calls == [["get node", "annotate node", "drain"]]  # cordoned (marked) and drained before anything
    assert fake.log[3:] == ["delete node", "reset"]
    assert result.ok and [o.name for o in result.nodes["gpu03"].ops] == [
        "remove node | drain", "remove node | delete node", "remove node | kubeadm reset"]
    assert sorted(node_record.read(c.state_dir)) == ["cp1", "gpu01", "gpu02"]


def test_force_evicts_unmanaged_pods_and_bypasses_disruption_budgets(tmp_path):
    c, fake = cluster(tmp_path), Fake()
    K8sRemoval(c, [GPU03], run=fake, force=True).before("gpu03")
    assert "drain --force --disable-eviction" in fake.log


def test_a_drain_that_does_not_finish_stops_the_apply_and_the_node_stays_cordoned(tmp_path):
    c, fake, calls = cluster(tmp_path), Fake(drain_rc=1), []
    recorded(c, GPU03)
    result = removal_phase.around(c, "apply", components(c, calls, fake), run=fake)
    assert calls == [] and not result.ok and "must stay in the cluster" in result.warnings[0]
    assert "kubectl drain did not finish" in result.nodes["gpu03"].error
    assert node_record.read(c.state_dir)["gpu03"].pending == DRAINED and fake.annotated


def test_an_unreachable_node_is_deleted_and_its_reset_left_for_a_later_apply(tmp_path):
    c, calls = cluster(tmp_path), []
    fake = Fake(reset=NodeError("command timed out after 180 s", node="gpu03"))
    recorded(c, GPU03)
    result = removal_phase.around(c, "apply", components(c, calls, fake), run=fake)
    assert not result.ok and result.nodes["gpu03"].ops[-1].name == "remove node | kubeadm reset"
    assert node_record.read(c.state_dir)["gpu03"].pending == SERVICES_LEFT and not fake.known


def test_a_node_put_back_is_uncordoned_only_when_the_cordon_was_corrals(tmp_path):
    c = cluster(tmp_path)
    ours = Fake(annotated=True)
    ops = K8sRemoval(c, [], run=ours).lift("gpu03")
    assert [(o.name, o.status) for o in ops] == [("back in the spec | uncordon", "changed")]
    assert ours.log == ["get node", "uncordon gpu03", "annotate node"] and not ours.annotated
    theirs = Fake(annotated=False)
    assert K8sRemoval(c, [], run=theirs).lift("gpu03") == [] and theirs.log == ["get node"]


def test_the_reset_script_resets_and_stops_the_kubelet(tmp_path):
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    for tool, body in (("kubeadm", 'echo "kubeadm $*" >> "$LOG"; exit "${KUBEADM_RC:-0}"'),
                       ("systemctl", 'echo "systemctl $*" >> "$LOG"; [ "$1" = is-active ] && exit "${ACTIVE_RC:-3}"; '
                                     "exit 0"), ("timeout", 'shift; exec "$@"')):
        (bin_ / tool).write_text(f"#!/bin/sh\n{body}\n")
        (bin_ / tool).chmod(0o755)
    env = {"PATH": f"{bin_}:/usr/bin:/bin", "LOG": str(tmp_path / "log")}
    assert subprocess.run(["sh", "-c", RESET], env=env).returncode == 0
    assert (tmp_path / "log").read_text().splitlines() == [
        "kubeadm reset -f", "systemctl disable --now kubelet.service", "systemctl is-active --quiet kubelet.service"]
    failed = subprocess.run(["sh", "-c", RESET], env={**env, "KUBEADM_RC": "5"}, capture_output=True, text=True)
    assert failed.returncode == 5 and "kubeadm reset -f failed (exit 5)" in failed.stderr
    stuck = subprocess.run(["sh", "-c", RESET], env={**env, "ACTIVE_RC": "0"}, capture_output=True, text=True)
    assert stuck.returncode == 1 and "kubelet still active" in stuck.stderr
