"""kube-prometheus-stack on a Kubernetes cluster (pure; docs/components/kubernetes.md): the Helm chart's
values from the spec, with corral's GPU alert rules (render/alerts.py: XID errors, uncorrectable ECC,
temperature over health.max_gpu_temp_c) as one PrometheusRule group, labelled by dcgm-exporter's
`Hostname` instead of node-exporter's `node`, and Prometheus selecting every ServiceMonitor (the GPU
Operator's dcgm-exporter one included)."""

from __future__ import annotations

from corral.render.alerts import _duration, rules
from corral.render.kubernetes import yaml_text
from corral.spec.cluster import Cluster

CHART_VERSION = "66.3.1"  # prometheus-community/kube-prometheus-stack
GPU_RULES = ("GpuXidError", "GpuEccUncorrectable", "GpuTemperatureHigh")


def gpu_rule_group(cluster: Cluster) -> dict:
    override = cluster.spec.monitoring.alerts.for_s
    out = []
    for r in rules(cluster):
        if r.alert in GPU_RULES:
            out.append({"alert": r.alert, "expr": r.expr, "for": _duration(r.for_s if override is None else override),
                        "labels": {"severity": r.severity, "cluster": cluster.name},
                        "annotations": {"summary": r.summary.replace("$labels.node", "$labels.Hostname")}})
    return {"name": "corral-gpu", "rules": out}


def values(cluster: Cluster) -> str:
    """values.yaml for `helm install kube-prometheus-stack prometheus-community/kube-prometheus-stack`."""
    v = {"prometheus": {"prometheusSpec": {"serviceMonitorSelectorNilUsesHelmValues": False,
                                           "ruleSelectorNilUsesHelmValues": False}},
         "additionalPrometheusRulesMap": {"corral-gpu": {"groups": [gpu_rule_group(cluster)]}}}
    return (f"# Managed by corral: kube-prometheus-stack {CHART_VERSION}; corral's GPU alert rules\n" + yaml_text(v))
