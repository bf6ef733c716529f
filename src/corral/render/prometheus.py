"""prometheus.yml from the spec: every node of every role is scraped (node-exporter), and
Prometheus itself. Targets are spec addresses; each carries its node name and roles as labels."""

from __future__ import annotations

import json

from corral.spec.cluster import Cluster


def listen_address(cluster: Cluster, address: str, port: int) -> str:
    """Bind the node's cluster address unless the spec says `monitoring.listen: all`."""
    host = f"[{address}]" if ":" in address else address
    return f":{port}" if cluster.spec.monitoring.listen == "all" else f"{host}:{port}"


def _target(address: str, port: int) -> str:
    return f"[{address}]:{port}" if ":" in address else f"{address}:{port}"


def render_prometheus_yml(cluster: Cluster) -> str:
    m = cluster.spec.monitoring
    mon = cluster.with_role("monitoring")
    lines = [f"# Managed by corral from {cluster.path.name} - do not edit", "global:",
             f"  scrape_interval: {m.scrape_interval_s}s", f"  evaluation_interval: {m.scrape_interval_s}s",
             "  external_labels:", f"    cluster: {json.dumps(cluster.name)}", "", "scrape_configs:",
             "  - job_name: prometheus", "    static_configs:"]
    for n in mon:
        lines += [f"      - targets: [{json.dumps(_target(n.address, m.prometheus_port))}]",
                  f"        labels: {{node: {json.dumps(n.name)}}}"]
    lines += ["  - job_name: node", "    static_configs:"]
    for n in cluster.nodes:
        lines += [f"      - targets: [{json.dumps(_target(n.address, m.node_exporter_port))}]",
                  f"        labels: {{node: {json.dumps(n.name)}, roles: {json.dumps(','.join(n.roles))}}}"]
    return "\n".join(lines) + "\n"
