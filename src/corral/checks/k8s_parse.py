"""Parsers of what `corral validate` reads from a Kubernetes cluster (pure; the Kubernetes path, issue 19):
`kubectl get nodes -o json` (each spec node Ready, its allocatable GPU resources what the spec says), a
GPU test pod's status and log (`nvidia-smi -L` in a pod asking for one GPU sees exactly one), and
dcgm-exporter's metrics (a GPU series per GPU worker). Results are (status, message) per node, in the
same contract as the Slurm validator's checks. Proven on outputs composed in the API's format
(tests/fixtures/kubernetes/README.md), not on a live cluster."""

from __future__ import annotations

import json
import re
from collections import Counter

from corral.spec.cluster import Cluster, Node

GPU = "nvidia.com/gpu"


def expected_resources(cluster: Cluster, node: Node) -> dict[str, int]:
    """The GPU resources the device plugin should advertise on `node` under the spec's MIG strategy:
    none: nvidia.com/gpu per GPU; single: nvidia.com/gpu per MIG device (whole GPUs where no layout);
    mixed: nvidia.com/mig-<profile> per MIG device and nvidia.com/gpu per GPU without MIG."""
    if not node.gpu_count:
        return {}
    strategy = cluster.spec.kubernetes.gpu_operator.mig_strategy
    from corral.spec.mig import layout
    lay = layout(node.gpus) if node.gpus is not None and node.gpus.mig is not None else None
    if strategy == "none" or not lay:
        return {GPU: node.gpu_count}
    devices = Counter(p for profiles in lay.values() for p in profiles)
    whole = sum(1 for profiles in lay.values() if not profiles) + max(0, node.gpu_count - len(lay))
    if strategy == "single":
        return {GPU: sum(devices.values()) + whole}
    out = {f"nvidia.com/mig-{p}": n for p, n in sorted(devices.items())}
    if whole:
        out[GPU] = whole
    return out


def parse_nodes(text: str) -> dict[str, dict]:
    """name -> {ready: bool|None, reason, allocatable: {resource: str}} from `kubectl get nodes -o json`."""
    try:
        items = json.loads(text)["items"]
    except (ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"not the output of kubectl get nodes -o json ({exc})") from None
    out = {}
    for item in items:
        meta, status = item.get("metadata") or {}, item.get("status") or {}
        ready = next((c for c in status.get("conditions") or [] if c.get("type") == "Ready"), None)
        out[meta.get("name", "?")] = {
            "ready": None if ready is None else ready.get("status") == "True",
            "reason": (ready or {}).get("message") or (ready or {}).get("reason") or "",
            "allocatable": dict(status.get("allocatable") or {}),
            "unschedulable": bool((item.get("spec") or {}).get("unschedulable"))}
    return out


def nodes_report(cluster: Cluster, text: str) -> dict[str, tuple[str, str]]:
    """Per spec node: OK, or FAIL saying what is wrong (not in the cluster, not Ready, GPU resources)."""
    found, out = parse_nodes(text), {}
    for node in cluster.nodes:
        got = found.get(node.name)
        if got is None:
            out[node.name] = ("FAIL", "not a node of the Kubernetes cluster (kubeadm join did not finish?)")
            continue
        if not got["ready"]:
            out[node.name] = ("FAIL", f"not Ready: {got['reason'] or 'no Ready condition'}")
            continue
        want, wrong = expected_resources(cluster, node), []
        for resource, count in want.items():
            have = got["allocatable"].get(resource, "0")
            if str(have) != str(count):
                wrong.append(f"{resource} {have}, expected {count}")
        extra = sorted(r for r in got["allocatable"] if r.startswith("nvidia.com/") and r not in want
                       and str(got["allocatable"][r]) != "0")
        wrong += [f"{r} {got['allocatable'][r]} not in the spec" for r in extra]
        if wrong:
            out[node.name] = ("FAIL", "allocatable: " + "; ".join(wrong))
        else:
            out[node.name] = ("OK", "Ready" + (f", {', '.join(f'{v} {k}' for k, v in want.items())}" if want else ""))
    return out


GPU_LINE = re.compile(r"^GPU \d+: .+\(UUID: (GPU|MIG)-[0-9a-fA-F-]+\)$")


def gpu_pod_result(pod_json: str, log: str) -> tuple[str, str]:
    """A pod that asked for one GPU and ran `nvidia-smi -L`: Succeeded, and its log names exactly one GPU."""
    try:
        pod = json.loads(pod_json)
    except ValueError:
        return "FAIL", "the pod's status is not JSON (kubectl get pod -o json)"
    phase = (pod.get("status") or {}).get("phase", "?")
    node = (pod.get("spec") or {}).get("nodeName") or "?"
    if phase != "Succeeded":
        states = [s.get("state") or {} for s in (pod.get("status") or {}).get("containerStatuses") or []]
        why = next((v.get("reason") or v.get("message") for st in states for v in st.values() if isinstance(v, dict)
                    and (v.get("reason") or v.get("message"))), "")
        return "FAIL", f"pod on {node}: {phase}" + (f" ({why})" if why else "")
    gpus = [line for line in log.splitlines() if GPU_LINE.match(line.strip())]
    if len(gpus) != 1:
        return "FAIL", f"pod on {node}: nvidia-smi saw {len(gpus)} GPUs, expected exactly 1"
    return "OK", f"pod on {node}: {gpus[0].strip()}"


def dcgm_report(cluster: Cluster, metrics: str) -> dict[str, tuple[str, str]]:
    """Per GPU worker: dcgm-exporter publishes DCGM_FI_DEV_GPU_UTIL for each of its GPUs (label Hostname)."""
    seen: Counter = Counter()
    for line in metrics.splitlines():
        if line.startswith("DCGM_FI_DEV_GPU_UTIL{"):
            m = re.search(r'Hostname="([^"]*)"', line)
            if m:
                seen[m.group(1)] += 1
    out = {}
    for node in cluster.with_role("worker"):
        if node.gpu_count:
            n = seen.get(node.name, 0)
            out[node.name] = ("OK", f"{n} GPU series") if n >= node.gpu_count else (
                "FAIL", f"{n} DCGM_FI_DEV_GPU_UTIL series, expected {node.gpu_count} (dcgm-exporter running?)")
    return out
