"""NVIDIA's GPU Operator on a Kubernetes cluster (pure; docs/components/kubernetes.md): the Helm chart's
values from the spec (the driver container at nvidia.driver.version, or the host's driver; the MIG
strategy; dcgm-exporter with a ServiceMonitor), the MIG manager's configuration from the nodes'
gpus.mig layouts (the same layouts as the Slurm path: render/mig.py), and the node labels that pick each
node's layout."""

from __future__ import annotations

import hashlib
import json

from corral.render.kubernetes import yaml_text
from corral.render.mig import mig_parted_config
from corral.spec.cluster import Cluster, Node

NAMESPACE = "gpu-operator"
MIG_CONFIGMAP = "corral-mig-parted-config"
MIG_LABEL = "nvidia.com/mig.config"


def _gpu_workers(cluster: Cluster) -> list[Node]:
    return [n for n in cluster.with_role("worker") if n.gpu_count]


def _layout_name(node: Node) -> str | None:
    """The MIG manager's name for a node's layout (nodes with the same layout share it); None: no layout."""
    if node.gpus is None or node.gpus.mig is None:
        return None
    text = mig_parted_config(node.gpus)
    return "corral-" + hashlib.sha256(text.encode()).hexdigest()[:10]


def mig_configs(cluster: Cluster) -> dict[str, list]:
    """layout name -> its mig-parted entries, over every GPU worker with a layout."""
    out = {}
    for n in _gpu_workers(cluster):
        name = _layout_name(n)
        if name is not None:
            out[name] = json.loads(mig_parted_config(n.gpus))["mig-configs"]["corral"]
    return dict(sorted(out.items()))


def upgrade_policy(cluster: Cluster) -> dict:
    """The Operator's driver upgrade policy from corral's rollout policy (spec `rollout:`): as many nodes at
    a time as a batch, each drained first within rollout.drain_timeout. The Operator has no canary: its
    first batch is the canary."""
    from corral.spec.rules_rollout import policy
    p = policy(cluster.spec)
    size = p.batch_size(max(1, len(_gpu_workers(cluster))))
    return {"autoUpgrade": True, "maxParallelUpgrades": size, "maxUnavailable": str(size),
            "podDeletion": {"timeoutSeconds": p.drain_timeout, "deleteEmptyDir": True},
            "drain": {"enable": True, "timeoutSeconds": p.drain_timeout, "deleteEmptyDir": True}}


def values(cluster: Cluster) -> str:
    """values.yaml for `helm install gpu-operator nvidia/gpu-operator --version <gpu_operator.version>`."""
    op, driver = cluster.spec.kubernetes.gpu_operator, cluster.spec.nvidia.driver
    by_operator = op.driver.source == "operator"
    v = {"driver": {"enabled": by_operator}}
    if by_operator and driver is not None:
        v["driver"]["version"] = driver.version
    if by_operator:  # a new nvidia.driver.version rolls out through the Operator's upgrade controller
        v["driver"]["upgradePolicy"] = upgrade_policy(cluster)
    v["toolkit"] = {"enabled": True}
    v["devicePlugin"] = {"enabled": True}
    v["mig"] = {"strategy": op.mig_strategy}
    migs = mig_configs(cluster)
    v["migManager"] = {"enabled": bool(migs)}
    if migs:
        v["migManager"]["config"] = {"name": MIG_CONFIGMAP, "default": "all-disabled"}
    v["dcgmExporter"] = {"enabled": True, "serviceMonitor": {"enabled": op.service_monitor}}
    return (f"# Managed by corral: NVIDIA GPU Operator {op.version} (helm chart nvidia/gpu-operator)\n"
            + yaml_text(v))


def mig_configmap(cluster: Cluster) -> str | None:
    """The MIG manager's ConfigMap (every layout by name, plus all-disabled); None without layouts."""
    migs = mig_configs(cluster)
    if not migs:
        return None
    config = {"version": "v1", "mig-configs": {"all-disabled": [{"devices": "all", "mig-enabled": False}], **migs}}
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": MIG_CONFIGMAP, "namespace": NAMESPACE},
          "data": {"config.yaml": yaml_text(config)}}
    return "# Managed by corral: MIG layouts from the nodes' gpus.mig\n" + yaml_text(cm)


def node_settings(cluster: Cluster) -> dict[str, tuple[dict[str, str], list]]:
    """node -> (the spec's labels, its taints) from kubernetes.nodes (later labels win; a taint once)."""
    from corral.spec.hosts import RangeError, expand_names
    out: dict[str, tuple[dict[str, str], list]] = {}
    for entry in cluster.spec.kubernetes.nodes:
        try:
            names = expand_names(entry.names)
        except RangeError:
            continue  # reported by spec/rules_kubernetes.py
        for name in names:
            labels, taints = out.get(name, ({}, []))
            out[name] = ({**labels, **entry.labels}, taints + [t for t in entry.taints if t not in taints])
    return out


def node_taints(cluster: Cluster) -> dict[str, list[str]]:
    """node -> its taints as kubectl taint writes them (key=value:Effect), compared with the cluster's."""
    from corral.facts.kubernetes import taint_text
    return {n: [taint_text(t.model_dump()) for t in taints] for n, (_, taints) in node_settings(cluster).items()
            if taints}


def node_labels(cluster: Cluster) -> dict[str, dict[str, str]]:
    """node -> the labels corral sets: the spec's (kubernetes.nodes), its role, and the MIG layout the MIG
    manager applies."""
    out: dict[str, dict[str, str]] = {}
    settings = node_settings(cluster)
    for n in cluster.nodes:
        labels = dict(settings.get(n.name, ({}, []))[0])
        if "worker" in n.roles:
            labels["node-role.kubernetes.io/worker"] = ""
        name = _layout_name(n) if "worker" in n.roles else None
        if name is not None:
            labels[MIG_LABEL] = name
        if labels:
            out[n.name] = labels
    return out


def cluster_files(cluster: Cluster) -> dict[str, str]:
    """name -> content of what corral applies to the cluster (not to a node's disk)."""
    from corral.render import kube_prometheus
    files = {"gpu-operator-values.yaml": values(cluster)}
    if cluster.spec.monitoring.enabled:
        files["kube-prometheus-stack-values.yaml"] = kube_prometheus.values(cluster)
    cm = mig_configmap(cluster)
    if cm is not None:
        files["mig-parted-configmap.yaml"] = cm
    files["node-labels.json"] = json.dumps(node_labels(cluster), indent=1, sort_keys=True) + "\n"
    taints = node_taints(cluster)
    if taints:
        files["node-taints.json"] = json.dumps(taints, indent=1, sort_keys=True) + "\n"
    return files
