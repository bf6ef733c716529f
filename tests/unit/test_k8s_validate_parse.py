"""validate's Kubernetes parsers (checks/k8s_parse.py) on outputs composed in the API's formats
(tests/fixtures/kubernetes/README.md): nodes Ready with the GPU resources the spec's MIG strategy implies,
a GPU pod that saw exactly one GPU, dcgm-exporter's series per GPU worker."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from corral.checks.k8s_parse import dcgm_report, expected_resources, gpu_pod_result, nodes_report
from corral.spec.loader import load, load_text

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "kubernetes"
HA = Path(__file__).resolve().parents[1] / "golden" / "kubernetes" / "ha" / "cluster.yaml"


@pytest.fixture
def cluster():
    return load(HA)


def nodes(mutate=None) -> str:
    data = json.loads((FIX / "nodes_ha.json").read_text())
    if mutate:
        mutate({i["metadata"]["name"]: i for i in data["items"]}, data)
    return json.dumps(data)


def test_expected_resources_follow_the_mig_strategy(cluster):
    assert expected_resources(cluster, cluster.node("gpu01")) == {"nvidia.com/gpu": 8}
    assert expected_resources(cluster, cluster.node("gpu03")) == {"nvidia.com/mig-3g.40gb": 16}
    assert expected_resources(cluster, cluster.node("cp1")) == {}
    single = load_text(HA.read_text().replace("mig_strategy: mixed", "mig_strategy: single"), "cluster.yaml")
    assert expected_resources(single, single.node("gpu03")) == {"nvidia.com/gpu": 16}
    none = load_text(HA.read_text().replace("{mig_strategy: mixed}", "{mig_strategy: none}"), "cluster.yaml")
    assert expected_resources(none, none.node("gpu03")) == {"nvidia.com/gpu": 8}


def test_a_ready_cluster_with_the_spec_gpus_passes(cluster):
    report = nodes_report(cluster, nodes())
    assert {n: s for n, (s, _) in report.items()} == {n.name: "OK" for n in cluster.nodes}
    assert report["gpu03"][1] == "Ready, 16 nvidia.com/mig-3g.40gb"


def test_each_fault_is_named_on_its_node(cluster):
    def break_it(by_name, data):
        ready = next(c for c in by_name["gpu02"]["status"]["conditions"] if c["type"] == "Ready")
        ready.update(status="False", message="container runtime network not ready: cni plugin not initialized")
        by_name["gpu01"]["status"]["allocatable"]["nvidia.com/gpu"] = "7"
        by_name["gpu03"]["status"]["allocatable"]["nvidia.com/gpu"] = "8"
        data["items"].remove(by_name["cp3"])
    report = nodes_report(cluster, nodes(break_it))
    assert report["gpu02"] == ("FAIL", "not Ready: container runtime network not ready: cni plugin not initialized")
    assert report["gpu01"] == ("FAIL", "allocatable: nvidia.com/gpu 7, expected 8")
    assert report["gpu03"] == ("FAIL", "allocatable: nvidia.com/gpu 8 not in the spec")
    assert report["cp3"][0] == "FAIL" and "not a node of the Kubernetes cluster" in report["cp3"][1]
    assert report["cp1"][0] == "OK"
    with pytest.raises(ValueError, match="not the output of kubectl get nodes -o json"):
        nodes_report(cluster, "error: the server doesn't have a resource type \"nodes\"")


def test_the_gpu_pod_sees_exactly_one_gpu():
    pod, log = (FIX / "pod_gpu_succeeded.json").read_text(), (FIX / "pod_gpu.log").read_text()
    status, message = gpu_pod_result(pod, log)
    assert status == "OK" and message.startswith("pod on gpu01: GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-")
    assert gpu_pod_result(pod, log + log.replace("GPU 0", "GPU 1")) == (
        "FAIL", "pod on gpu01: nvidia-smi saw 2 GPUs, expected exactly 1")
    pending = json.loads(pod)
    pending["status"] = {"phase": "Pending", "containerStatuses": [
        {"name": "smi", "state": {"waiting": {"reason": "ContainerCreating"}}}]}
    assert gpu_pod_result(json.dumps(pending), "") == ("FAIL", "pod on gpu01: Pending (ContainerCreating)")
    failed = copy.deepcopy(json.loads(pod))
    failed["status"]["phase"] = "Failed"
    failed["status"]["containerStatuses"][0]["state"] = {"terminated": {"exitCode": 127, "reason": "Error"}}
    assert gpu_pod_result(json.dumps(failed), "") == ("FAIL", "pod on gpu01: Failed (Error)")


def test_dcgm_series_per_gpu_worker(cluster):
    series = "".join(f'DCGM_FI_DEV_GPU_UTIL{{gpu="{i}",UUID="GPU-x{i}",Hostname="{host}"}} 0\n'
                     for host in ("gpu01", "gpu02") for i in range(8))
    report = dcgm_report(cluster, "# HELP DCGM_FI_DEV_GPU_UTIL GPU utilization (in %).\n" + series)
    assert report["gpu01"] == ("OK", "8 GPU series") and report["gpu02"][0] == "OK"
    assert report["gpu03"] == ("FAIL", "0 DCGM_FI_DEV_GPU_UTIL series, expected 8 (dcgm-exporter running?)")
    assert "cp1" not in report
