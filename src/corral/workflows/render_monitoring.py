"""`corral render` for `scheduler: slurm`, the monitoring deploys (workflows/render_slurm.py holds the others
and calls these last, as deploy/__init__.py orders them): node-exporter's flags and spec metrics on every
node; Prometheus (scrape config, alert rules, flags) and Alertmanager (receivers, flags) on the monitoring
node; corral's Slurm exporter (its programs and unit) on the first controller; dcgm-exporter (pin, field
list, unit) on GPU compute nodes; Grafana (apt source, pin, grafana.ini with its admin password a
placeholder, datasource, dashboard provider, the dashboards as installed); the restart drop-ins. Each
from the function its deploy calls."""

from __future__ import annotations

from collections.abc import Callable

from corral.spec.cluster import Node
from corral.workflows.render_slurm import Ctx, Files, restart_dropins


def _wanted(c: Ctx) -> bool:
    """Monitoring is deployed at all: enabled, and a node has the monitoring role."""
    return c.cluster.spec.monitoring.enabled and bool(c.cluster.with_role("monitoring"))


def _monitoring(c: Ctx, node: Node) -> Files:
    from corral.deploy.monitoring import (AM_DEFAULT, AM_YML, NE_DEFAULT, PROM_DEFAULT, PROM_YML, RULES, SPEC_PROM,
                                          alertmanager_flags, node_exporter_args, prometheus_flags, spec_metrics)
    from corral.render.alertmanager import render_alertmanager_yml
    from corral.render.alerts import render_rules
    from corral.render.prometheus import render_prometheus_yml
    if not _wanted(c):
        return {}
    out: Files = {NE_DEFAULT: node_exporter_args(c.cluster, node), SPEC_PROM: spec_metrics(node),
                  **restart_dropins("prometheus-node-exporter")}
    if "monitoring" in node.roles:
        out.update({AM_YML: render_alertmanager_yml(c.cluster), AM_DEFAULT: alertmanager_flags(c.cluster, node),
                    **restart_dropins("prometheus-alertmanager"),
                    RULES: render_rules(c.cluster), PROM_YML: render_prometheus_yml(c.cluster),
                    PROM_DEFAULT: prometheus_flags(c.cluster, node), **restart_dropins("prometheus")})
    return out


# the deploys' order (deploy/__init__.py components): after render_slurm.py's
RENDERERS: dict[str, Callable[[Ctx, Node], Files]] = {"monitoring": _monitoring}
