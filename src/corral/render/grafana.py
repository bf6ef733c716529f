"""Grafana files from the spec: grafana.ini (listen address, admin password, anonymous access off,
no sign-up, no phoning home), the Prometheus datasource and the dashboard provider; the
dashboards themselves are JSON files in render/dashboards/ (their PromQL is evaluated by a test)."""

from __future__ import annotations

import json
from importlib import resources

from corral.spec.cluster import Cluster

DASHBOARD_DIR = "/var/lib/grafana/dashboards/corral"


def dashboards() -> dict[str, str]:
    """File name -> JSON text of every shipped dashboard."""
    folder = resources.files("corral.render").joinpath("dashboards")
    return {f.name: f.read_text() for f in sorted(folder.iterdir(), key=lambda f: f.name)
            if f.name.endswith(".json")}


def render_ini(cluster: Cluster, address: str, password: str) -> str:
    g, listen = cluster.spec.monitoring.grafana, cluster.spec.monitoring.listen
    return "\n".join([
        f"; Managed by corral from {cluster.path.name} - do not edit", "[server]",
        f"http_addr = {'' if listen == 'all' else address}", f"http_port = {g.port}", "",
        "[security]", "admin_user = admin", f"admin_password = {password}", "cookie_secure = false",
        "disable_gravatar = true", "", "[auth.anonymous]", "enabled = false", "",
        "[users]", "allow_sign_up = false", "", "[analytics]", "reporting_enabled = false",
        "check_for_updates = false", "check_for_plugin_updates = false", ""])


def render_datasource(cluster: Cluster) -> str:
    m = cluster.spec.monitoring
    mon = cluster.with_role("monitoring")[0]
    url = f"http://{mon.address}:{m.prometheus_port}"
    return "\n".join(["# Managed by corral", "apiVersion: 1", "datasources:", "  - name: Prometheus",
                      "    uid: corral-prometheus", "    type: prometheus", "    access: proxy",
                      f"    url: {json.dumps(url)}", "    isDefault: true", "    editable: false",
                      "    jsonData:", f"      timeInterval: {m.scrape_interval_s}s", ""])


def render_provider() -> str:
    return "\n".join(["# Managed by corral", "apiVersion: 1", "providers:", "  - name: corral",
                      "    folder: corral", "    type: file", "    disableDeletion: true",
                      "    allowUiUpdates: false", "    options:", f"      path: {DASHBOARD_DIR}", ""])
