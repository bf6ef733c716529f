"""Grafana files from the spec: grafana.ini (listen address, admin password, anonymous access off,
no sign-up, no phoning home), the Prometheus datasource and the dashboard provider; the
dashboards themselves are JSON files in render/dashboards/ (their PromQL is evaluated by a test).

The component, declared as data (components/slurm.py `resources`): Grafana on the `monitoring` node from Grafana's
package repository (real clusters), datasource and dashboards provisioned as files, admin password random (state
dir), anonymous access off. The offline virtual cluster cannot reach Grafana's repository: skipped, said in plan."""

from __future__ import annotations

import json
from importlib import resources as package_files

from corral import secrets
from corral.render import resources as r
from corral.render.prometheus import listens_on
from corral.render.ready import http_ready
from corral.render.restart import POLICIES
from corral.render.vendor_repos import grafana_fingerprint, grafana_pin
from corral.spec.cluster import Cluster

DASHBOARD_DIR = "/var/lib/grafana/dashboards/corral"
KEY, SOURCE = "/etc/apt/keyrings/grafana.asc", "/etc/apt/sources.list.d/grafana.list"
PIN, INI = "/etc/apt/preferences.d/corral-grafana", "/etc/grafana/grafana.ini"
DATASOURCE = "/etc/grafana/provisioning/datasources/corral.yaml"
PROVIDER = "/etc/grafana/provisioning/dashboards/corral.yaml"
PASSWORD = "grafana-admin-password"  # in the state dir's secrets/


def dashboards() -> dict[str, str]:
    """File name -> JSON text of every shipped dashboard."""
    folder = package_files.files("corral.render").joinpath("dashboards")
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


def source_text(repo_url: str) -> str:
    """Grafana's apt source, signed by the pinned key (KEY)."""
    return f"# Managed by corral\ndeb [signed-by={KEY}] {repo_url} stable main\n"


def skip_reason(cluster) -> str | None:
    if not cluster.spec.monitoring.grafana.enabled:
        return "monitoring.grafana.enabled is false"
    if cluster.spec.virtual is not None:
        return ("virtual cluster: Grafana comes from Grafana's package repository, which the offline "
                "virtual nodes cannot reach (dashboards are still checked against its Prometheus by the tests)")
    return None


def applies(cluster, node) -> bool:
    m = cluster.spec.monitoring
    return m.enabled and "monitoring" in node.roles


def resources(cluster, node) -> list:
    reason = skip_reason(cluster)
    if reason:
        return [r.Skip("Grafana", reason)]
    g, out = cluster.spec.monitoring.grafana, []
    if cluster.spec.packages.source != "bundle":  # else the bundle's repository carries it (bundle/vendor.py)
        out += [r.Key("Grafana signing key", KEY, g.key_url, grafana_fingerprint(cluster), "Grafana"),
                r.File(SOURCE, source_text(g.repo_url), "Grafana apt source"),
                r.OnChange("apt lists refreshed (Grafana source)", "apt-get update", (SOURCE,),
                           ("DEBIAN_FRONTEND=noninteractive apt-get update -q",))]
    if g.version:
        out.append(r.File(PIN, grafana_pin(g.version), "Grafana version pin"))
    ini = r.Made(lambda: render_ini(cluster, node.address, secrets.secret_text(cluster.state_dir, PASSWORD, 24)),
                 PASSWORD, shown=lambda: render_ini(cluster, node.address,
                                                    r.secret_placeholder(f"state-dir/secrets/{PASSWORD}")))
    restart, configs = "restart grafana-server", (INI, DATASOURCE, PROVIDER)
    return [
        *out,
        r.Packages((f"grafana={g.version}" if g.version else "grafana",), "Grafana installed", "monitoring.grafana",
                   vendor=True, together=False),
        r.File(INI, ini, mode="640", group="grafana", secret=True, disruption=restart),
        r.File(DATASOURCE, render_datasource(cluster), "Grafana datasource", mode="640", group="grafana",
               disruption=restart),
        r.File(PROVIDER, render_provider(), "Grafana dashboard provider", mode="640", group="grafana",
               disruption=restart),
        r.Directory(DASHBOARD_DIR),
        *(r.File(f"{DASHBOARD_DIR}/{name}", text, f"dashboard {name}") for name, text in dashboards().items()),
        r.Service("grafana-server", "Grafana running", http_ready(node.address, g.port, "/api/health"),
                  "Grafana restarted (configuration changed)", configs, policy=POLICIES["grafana-server"],
                  policy_op="Grafana restarted by systemd when it dies",
                  runs=r.Daemon("grafana-server.service", "grafana", "Grafana",
                                listens=(r.Listener(g.port, "admins' browsers", on=listens_on(cluster)),))),
    ]
