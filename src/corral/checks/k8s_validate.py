"""`corral validate` on a Kubernetes cluster (scheduler: kubernetes; docs/components/kubernetes.md).

From a control-plane node (the first that answers), through the same seam as the Slurm validator
(`run(node, command, *, timeout, input=None)`): the API server and its version, every spec node Ready
with the GPU resources its MIG strategy implies, one pod per GPU worker asking for one GPU that runs
`nvidia-smi -L` and must see exactly one, and dcgm-exporter's GPU series from the pod on each GPU worker.
Parsing is checks/k8s_parse.py. The pods are named corral-validate-<node>, labelled
app.kubernetes.io/name=corral-validate, and deleted in a `finally`, whatever happened. Proven with a
stand-in runner answering in the API's formats (tests/unit/test_k8s_validate.py), not a live cluster.

JSON: the Slurm validator's contract shape (ok, failures, checks) with Kubernetes' fields:
kubernetes_version, api_reachable, nodes_total, nodes_ready, gpus_allocatable, gpu_pods_ok, dcgm_ok
(DeepOps' GPU-pod check is the gpu_pods_ok subset)."""

from __future__ import annotations

import json
import shlex
import time

from corral.checks.k8s_parse import dcgm_report, expected_resources, gpu_pod_result, nodes_report
from corral.checks.result import Check, Report, error_text
from corral.errors import CorralError
from corral.facts.kubernetes import KUBECTL as kubectl
from corral.spec.cluster import Cluster

KUBECTL = f"timeout 30 {kubectl}"
LABEL = "app.kubernetes.io/name=corral-validate"
IMAGE = "nvcr.io/nvidia/cuda:12.6.3-base-ubuntu22.04"
TIMEOUT_S = 300  # the GPU pods, all together (a first pull of the CUDA base image included)
POLL_S = 3


def contract(nodes_total: int) -> dict:
    return {"kubernetes_version": None, "api_reachable": False, "nodes_total": nodes_total, "nodes_ready": 0,
            "gpus_allocatable": 0, "gpu_pods_ok": None, "dcgm_ok": None}


def pod_manifest(cluster: Cluster, node: str) -> dict:
    """One pod on `node` asking for one GPU (or one MIG device of the node's first profile, mixed strategy)."""
    resource = next(iter(expected_resources(cluster, cluster.node(node))))
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"corral-validate-{node}", "namespace": "default",
                         "labels": {"app.kubernetes.io/name": "corral-validate"}},
            "spec": {"restartPolicy": "Never", "nodeSelector": {"kubernetes.io/hostname": node},
                     "containers": [{"name": "nvidia-smi", "image": IMAGE, "command": ["nvidia-smi", "-L"],
                                     "resources": {"limits": {resource: 1}}}]}}


def _api(cluster: Cluster, run, report: Report) -> tuple[str | None, str]:
    """The first control-plane node whose API answers, and `kubectl get nodes -o json` from it."""
    why = ""
    for cp in [n.name for n in cluster.with_role("control-plane")]:
        try:
            proc = run(cp, f"{KUBECTL} version -o json && echo '--- nodes' && {KUBECTL} get nodes -o json", timeout=70)
        except CorralError as exc:
            why = error_text(exc)
            continue
        if proc.returncode == 0 and "--- nodes" in proc.stdout:
            version, _, nodes = proc.stdout.partition("--- nodes")
            try:
                report.extra["kubernetes_version"] = json.loads(version)["serverVersion"]["gitVersion"]
            except (ValueError, KeyError, TypeError):
                pass
            report.extra["api_reachable"] = True
            report.checks.append(Check("API server", "OK", f"answers on {cp} ({report.extra['kubernetes_version']})"))
            return cp, nodes
        why = f"{cp}: kubectl failed (rc={proc.returncode}): {(proc.stderr.strip().splitlines() or ['no output'])[-1]}"
    report.checks.append(Check("API server", "FAIL", f"no control-plane node's API server answered ({why})"))
    return None, ""


def validate_kubernetes(cluster: Cluster, *, jobs: bool = True, run=None, timeout_s: int = TIMEOUT_S,
                        fabric: bool = False) -> Report:
    """`fabric` (RDMA pairs) is Slurm's validate alone: the GPU pods here do not span nodes."""
    from corral.checks.validate import remote
    run = run or remote(cluster)
    report = Report(extra=contract(len(cluster.nodes)))
    cp, started = None, False
    try:
        cp, nodes = _api(cluster, run, report)
        if cp is None:
            return report
        try:
            per_node = nodes_report(cluster, nodes)
        except ValueError as exc:
            report.checks.append(Check("nodes", "FAIL", str(exc)))
            return report
        report.checks += [Check(f"node {n}", s, m) for n, (s, m) in per_node.items()]
        report.extra["nodes_ready"] = sum(1 for s, _ in per_node.values() if s == "OK")
        gpu_nodes = [n.name for n in cluster.nodes if n.gpu_count and per_node[n.name][0] == "OK"]
        report.extra["gpus_allocatable"] = sum(sum(expected_resources(cluster, cluster.node(n)).values())
                                               for n in gpu_nodes)
        if not jobs:
            report.checks.append(Check("GPU pods", "SKIPPED", "--skip-jobs: read-only run"))
        elif gpu_nodes:
            started = True
            _gpu_pods(cluster, run, cp, gpu_nodes, report, timeout_s)
        _dcgm(cluster, run, cp, report)
    except CorralError as exc:
        report.checks.append(Check("validate", "FAIL", error_text(exc, command=True)))
    finally:
        if started and cp is not None:  # started: the API answered on cp
            _delete(run, cp, report)
    return report


def _items(proc) -> list[dict]:
    """The items of a `kubectl get ... -o json` answer ([] when it failed or is not JSON)."""
    if proc.returncode != 0:
        return []
    try:
        return list(json.loads(proc.stdout or "{}").get("items") or [])
    except (ValueError, AttributeError):
        return []


def _gpu_pods(cluster: Cluster, run, cp: str, nodes: list[str], report: Report, timeout_s: int) -> None:
    items = {"apiVersion": "v1", "kind": "List", "items": [pod_manifest(cluster, n) for n in nodes]}
    proc = run(cp, f"{KUBECTL} apply -f -", timeout=60, input=json.dumps(items))
    if proc.returncode != 0:
        report.checks.append(Check("GPU pods", "FAIL", f"kubectl apply failed on {cp}: "
                                   f"{(proc.stderr.strip().splitlines() or ['no output'])[-1]}"))
        report.extra["gpu_pods_ok"] = False
        return
    deadline, done, phases = time.monotonic() + timeout_s, {}, {}
    while True:
        pods = {i.get("metadata", {}).get("name"): i for i in _items(run(cp, f"{KUBECTL} get pods -l {LABEL} -o json",
                                                                           timeout=40))}
        for n in [n for n in nodes if n not in done]:
            pod = pods.get(f"corral-validate-{n}")
            phases[n] = (pod or {}).get("status", {}).get("phase")
            if phases[n] in ("Succeeded", "Failed"):
                log = run(cp, f"{KUBECTL} logs {shlex.quote(f'corral-validate-{n}')}", timeout=40).stdout
                done[n] = gpu_pod_result(json.dumps(pod), log)
        if len(done) == len(nodes) or time.monotonic() > deadline:
            break
        time.sleep(POLL_S)
    for n in nodes:
        done.setdefault(n, ("FAIL", f"pod on {n}: {phases.get(n) or 'not found'} after {timeout_s} s "
                                    "(corral validate --timeout)"))
    report.checks += [Check(f"GPU pod {n}", *done[n]) for n in nodes]
    report.extra["gpu_pods_ok"] = all(done[n][0] == "OK" for n in nodes)


def _dcgm(cluster: Cluster, run, cp: str, report: Report) -> None:
    """dcgm-exporter's metrics from its pod on each node (through the API server's pod proxy), labelled
    by that node: in a pod, the exporter's own Hostname label is the pod's name."""
    proc = run(cp, f"{KUBECTL} -n gpu-operator get pods -l app=nvidia-dcgm-exporter -o json", timeout=40)
    pods = {i.get("spec", {}).get("nodeName"): i.get("metadata", {}).get("name") for i in _items(proc)}
    text = []
    for node, pod in sorted((n, p) for n, p in pods.items() if n and p):
        path = f"/api/v1/namespaces/gpu-operator/pods/{pod}:9400/proxy/metrics"
        got = run(cp, f"{KUBECTL} get --raw {shlex.quote(path)}", timeout=40)
        if got.returncode == 0:
            text += [line.replace("DCGM_FI_DEV_GPU_UTIL{", f'DCGM_FI_DEV_GPU_UTIL{{Hostname="{node}",', 1)
                     for line in got.stdout.splitlines() if line.startswith("DCGM_FI_DEV_GPU_UTIL{")]
    per_node = dcgm_report(cluster, "\n".join(text))
    report.checks += [Check(f"DCGM {n}", s, m) for n, (s, m) in per_node.items()]
    report.extra["dcgm_ok"] = all(s == "OK" for s, _ in per_node.values()) if per_node else None


def _delete(run, cp: str, report: Report) -> None:
    try:
        proc = run(cp, f"{KUBECTL} delete pods -l {LABEL} --ignore-not-found --wait=false", timeout=40)
        ok = proc.returncode == 0
    except CorralError:
        ok = False
    if not ok:
        report.checks.append(Check("pods deleted", "FAIL", f"kubectl delete pods -l {LABEL} failed on {cp}: "
                                   "delete them by hand"))
