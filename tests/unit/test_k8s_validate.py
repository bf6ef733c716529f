"""`corral validate` on a Kubernetes cluster (checks/k8s_validate.py) with a stand-in runner answering
in the API's formats (the composed fixtures of tests/fixtures/kubernetes/): the verdict, the GPU pods'
lifecycle (applied once, polled, their logs read, always deleted) and DCGM per node."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from corral.checks import k8s_validate
from corral.errors import NodeError
from corral.spec.loader import load

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "kubernetes"
HA = Path(__file__).resolve().parents[1] / "golden" / "kubernetes" / "ha" / "cluster.yaml"
VERSION = json.dumps({"clientVersion": {"gitVersion": "v1.31.4"}, "serverVersion": {"gitVersion": "v1.31.4"}})
GPUS = {"gpu01": 8, "gpu02": 8, "gpu03": 16}


@pytest.fixture
def cluster():
    return load(HA)


def ok(stdout: str = "", rc: int = 0, stderr: str = "") -> SimpleNamespace:
    return SimpleNamespace(returncode=rc, stdout=stdout, stderr=stderr)


class Cluster:
    """A stand-in for the nodes: answers kubectl as a healthy cluster would, with overrides."""

    def __init__(self, down: tuple = (), pod_phase: str = "Succeeded", log: str | None = None,
                 dcgm_missing: tuple = ()) -> None:
        self.calls: list[tuple[str, str, str | None]] = []
        self.down, self.pod_phase, self.dcgm_missing = down, pod_phase, dcgm_missing
        self.log = log if log is not None else (FIX / "pod_gpu.log").read_text()
        self.applied: list[dict] = []

    def __call__(self, node, command, *, timeout, input=None):
        self.calls.append((node, command, input))
        if node in self.down:
            raise NodeError("command timed out after 70 s", node=node, command=command)
        if "version -o json" in command:
            return ok(VERSION + "\n--- nodes\n" + (FIX / "nodes_ha.json").read_text())
        if command.endswith("apply -f -"):
            self.applied = json.loads(input)["items"]
            return ok("pod/corral-validate-gpu01 created\n")
        if "get pods -l app.kubernetes.io/name=corral-validate" in command:
            base = json.loads((FIX / "pod_gpu_succeeded.json").read_text())
            items = []
            for pod in self.applied:
                p = copy.deepcopy(base)
                p["metadata"]["name"], p["spec"]["nodeName"] = pod["metadata"]["name"], pod["spec"]["nodeSelector"][
                    "kubernetes.io/hostname"]
                p["status"]["phase"] = self.pod_phase
                items.append(p)
            return ok(json.dumps({"items": items}))
        if " logs " in command:
            return ok(self.log)
        if "app=nvidia-dcgm-exporter" in command:
            return ok(json.dumps({"items": [{"metadata": {"name": f"nvidia-dcgm-exporter-{n}"}, "spec": {"nodeName": n}}
                                            for n in GPUS if n not in self.dcgm_missing]}))
        if "get --raw" in command:
            node_name = command.split("nvidia-dcgm-exporter-")[1].split(":")[0]
            return ok("# HELP DCGM_FI_DEV_GPU_UTIL GPU utilization (in %).\n" + "".join(
                f'DCGM_FI_DEV_GPU_UTIL{{gpu="{i}",UUID="GPU-{i}",Hostname="nvidia-dcgm-exporter-x"}} 0\n'
                for i in range(8)))
        if "delete pods" in command:
            return ok("")
        raise AssertionError(f"unexpected command on {node}: {command}")


def test_a_healthy_cluster_passes_with_the_contract_fields(cluster, monkeypatch):
    monkeypatch.setattr(k8s_validate, "POLL_S", 0)
    nodes = Cluster()
    report = k8s_validate.validate_kubernetes(cluster, run=nodes)
    assert report.ok, report.failures
    extra = report.to_json()
    assert (extra["kubernetes_version"], extra["api_reachable"], extra["nodes_total"], extra["nodes_ready"]) == (
        "v1.31.4", True, 6, 6)
    assert extra["gpus_allocatable"] == 32 and extra["gpu_pods_ok"] is True and extra["dcgm_ok"] is True
    # one pod per GPU worker, each asking for one of its node's GPU resources; gpu03's is a MIG device (mixed)
    limits = {p["spec"]["nodeSelector"]["kubernetes.io/hostname"]: p["spec"]["containers"][0]["resources"]["limits"]
              for p in nodes.applied}
    assert limits == {"gpu01": {"nvidia.com/gpu": 1}, "gpu02": {"nvidia.com/gpu": 1},
                      "gpu03": {"nvidia.com/mig-3g.40gb": 1}}
    assert "delete pods -l app.kubernetes.io/name=corral-validate" in nodes.calls[-1][1]
    assert {n for n, *_ in nodes.calls} == {"cp1"}


def test_the_first_control_plane_down_the_next_answers(cluster, monkeypatch):
    monkeypatch.setattr(k8s_validate, "POLL_S", 0)
    nodes = Cluster(down=("cp1",))
    report = k8s_validate.validate_kubernetes(cluster, run=nodes, jobs=False)
    assert report.ok and report.checks[0].message.startswith("answers on cp2")
    assert [c for c in report.checks if c.name == "GPU pods"][0].status == "SKIPPED"
    assert not any("apply" in c or "delete" in c for _, c, _ in nodes.calls)  # read-only


def test_no_api_server_is_one_failure_naming_why(cluster):
    report = k8s_validate.validate_kubernetes(cluster, run=Cluster(down=("cp1", "cp2", "cp3")))
    assert not report.ok and report.failures == [
        "API server: no control-plane node's API server answered (cp3: command timed out after 70 s)"]
    assert report.to_json()["api_reachable"] is False


def test_a_pod_that_saw_two_gpus_fails_its_node_and_pods_are_still_deleted(cluster, monkeypatch):
    monkeypatch.setattr(k8s_validate, "POLL_S", 0)
    log = (FIX / "pod_gpu.log").read_text()
    nodes = Cluster(log=log + log.replace("GPU 0", "GPU 1").replace("GPU-", "GPU-f"))
    report = k8s_validate.validate_kubernetes(cluster, run=nodes)
    assert not report.ok and report.to_json()["gpu_pods_ok"] is False
    assert "GPU pod gpu01: pod on gpu01: nvidia-smi saw 2 GPUs, expected exactly 1" in report.failures
    assert "delete pods" in nodes.calls[-1][1]


def test_pods_that_never_finish_time_out_and_are_deleted(cluster, monkeypatch):
    monkeypatch.setattr(k8s_validate, "POLL_S", 0)
    nodes = Cluster(pod_phase="Pending")
    report = k8s_validate.validate_kubernetes(cluster, run=nodes, timeout_s=0)
    assert "GPU pod gpu02: pod on gpu02: Pending after 0 s (corral validate --timeout)" in report.failures
    assert "delete pods" in nodes.calls[-1][1]


def test_a_worker_without_dcgm_exporter_fails_its_dcgm_check(cluster, monkeypatch):
    monkeypatch.setattr(k8s_validate, "POLL_S", 0)
    report = k8s_validate.validate_kubernetes(cluster, run=Cluster(dcgm_missing=("gpu02",)), jobs=False)
    assert report.to_json()["dcgm_ok"] is False
    assert any(f.startswith("DCGM gpu02: 0 DCGM_FI_DEV_GPU_UTIL series, expected 8") for f in report.failures)
