"""prometheus.yml from the spec: every node of every role is scraped (node-exporter), and
Prometheus itself, Alertmanager, corral's Slurm exporter (controllers), dcgm-exporter (GPU nodes
where it is deployed), the image registry and the notebook hub. Targets are spec addresses; each carries its node name (and roles) as labels."""

from __future__ import annotations

import json

from corral.render import nvidia
from corral.spec import schedulers
from corral.spec.cluster import Cluster, Node

RULES_DIR = "/etc/prometheus/rules"


def listen_address(cluster: Cluster, address: str, port: int) -> str:
    """Bind the node's cluster address unless the spec says `monitoring.listen: all`."""
    host = f"[{address}]" if ":" in address else address
    return f":{port}" if cluster.spec.monitoring.listen == "all" else f"{host}:{port}"


def _target(address: str, port: int) -> str:
    return f"[{address}]:{port}" if ":" in address else f"{address}:{port}"


def listens_on(cluster: Cluster) -> str:
    """Where the monitoring daemons listen, as the audit's Listener says it (monitoring.listen)."""
    return "any" if cluster.spec.monitoring.listen == "all" else "cluster"


def dcgm_skip_reason(cluster: Cluster, node: Node) -> str | None:
    """Why dcgm-exporter is not deployed on `node` (None: it is)."""
    return nvidia.dcgm_skip_reason(cluster, node, cluster.spec.monitoring.dcgm_exporter.enabled,
                                   "monitoring.dcgm_exporter.enabled")


def _job(name: str, nodes: list[Node], port: int, roles: bool = False, honor: bool = False,
         path: str | None = None) -> list[str]:
    out = ([f"  - job_name: {name}"] + (["    honor_labels: true"] if honor else [])
           + ([f"    metrics_path: {path}"] if path else []) + ["    static_configs:"])
    for n in nodes:
        labels = f"node: {json.dumps(n.name)}" + (f", roles: {json.dumps(','.join(n.roles))}" if roles else "")
        out += [f"      - targets: [{json.dumps(_target(n.address, port))}]", f"        labels: {{{labels}}}"]
    return out


def _registry_job(cluster: Cluster) -> list[str]:
    """The registry's instances (images.registry): each one's debug address, labelled with what it serves."""
    from corral.render.registry import instances, registry_node
    node = registry_node(cluster)
    if node is None:
        return []
    out = ["  - job_name: registry", "    static_configs:"]
    for i in instances(cluster):
        labels = f"node: {json.dumps(node.name)}, registry: {json.dumps(i.upstream or 'site')}"
        out += [f"      - targets: [{json.dumps(_target(node.address, i.metrics_port))}]", f"        labels: {{{labels}}}"]
    return out


def _jupyterhub_job(cluster: Cluster) -> list[str]:
    """The notebook hub's own metrics (workbench.jupyterhub): its API port on the hub node, /hub/metrics."""
    from corral.render.jupyterhub import HUB_PORT
    from corral.spec.workbench import hub_node
    node = hub_node(cluster)
    return _job("jupyterhub", [node], HUB_PORT, path="/hub/metrics") if node is not None else []


def render_prometheus_yml(cluster: Cluster) -> str:
    m = cluster.spec.monitoring
    mon = cluster.with_role("monitoring")
    lines = [f"# Managed by corral from {cluster.path.name} - do not edit", "global:",
             f"  scrape_interval: {m.scrape_interval_s}s", f"  evaluation_interval: {m.scrape_interval_s}s",
             "  external_labels:", f"    cluster: {json.dumps(cluster.name)}", "",
             "rule_files:", f"  - {RULES_DIR}/*.yml", "", "alerting:", "  alertmanagers:",
             "    - static_configs:",
             "        - targets: [" + ", ".join(json.dumps(_target(n.address, m.alertmanager_port))
                                        for n in mon) + "]",
             "", "scrape_configs:"]
    lines += _job("prometheus", mon, m.prometheus_port)
    lines += _job("alertmanager", mon, m.alertmanager_port)
    lines += _job("node", cluster.nodes, m.node_exporter_port, roles=True)
    if "slurm-exporter" in schedulers.of(cluster).carries and cluster.with_role("controller"):
        # honor_labels: the exporter's own `node` label (per Slurm node) wins over the target's
        lines += _job("slurm", cluster.with_role("controller")[:1], m.slurm_exporter_port, honor=True)
    lines += _registry_job(cluster)
    lines += _jupyterhub_job(cluster)
    gpu_nodes = [n for n in cluster.nodes if dcgm_skip_reason(cluster, n) is None]
    if gpu_nodes:
        lines += _job("dcgm", gpu_nodes, m.dcgm_exporter.port)
    return "\n".join(lines) + "\n"
