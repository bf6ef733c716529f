"""grafana: Grafana on the `monitoring` node from Grafana's package repository (real clusters),
datasource and dashboards provisioned as files, admin password random (state dir), anonymous
access off. The offline virtual cluster cannot reach Grafana's repository: skipped, said in plan."""

from __future__ import annotations

from pyinfra import host
from pyinfra.api import deploy

from corral.deploy import operations
from corral.deploy.apt_keys import pinned_key
from corral.render.vendor_repos import grafana_fingerprint, grafana_pin
from corral.deploy.monitoring import http_ready
from corral.deploy.nodestate import Want, register
from corral.engine.conditions import AnyChanged
from corral.render.grafana import DASHBOARD_DIR, dashboards, render_datasource, render_ini, render_provider
from corral.render.restart import dropin_path
from corral.secrets import secret_text

KEY, SOURCE = "/etc/apt/keyrings/grafana.asc", "/etc/apt/sources.list.d/grafana.list"
PIN, INI = "/etc/apt/preferences.d/corral-grafana", "/etc/grafana/grafana.ini"
DATASOURCE = "/etc/grafana/provisioning/datasources/corral.yaml"
PROVIDER = "/etc/grafana/provisioning/dashboards/corral.yaml"
WANT = register(Want(paths=(KEY, SOURCE, PIN, INI, DATASOURCE, PROVIDER, DASHBOARD_DIR, dropin_path("grafana-server"),
                            *(f"{DASHBOARD_DIR}/{n}" for n in dashboards())),
                     services=("grafana-server",), packages=("grafana",)))


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


@deploy("grafana")
def grafana() -> None:
    node, cluster = host.data.corral_node, host.data.corral_cluster
    m = cluster.spec.monitoring
    if not m.enabled or "monitoring" not in node.roles:
        return
    reason = skip_reason(cluster)
    if reason:
        operations.skip(name="Grafana", reason=reason)
        return
    g = m.grafana
    if cluster.spec.packages.source != "bundle":  # else the bundle's repository carries it (bundle/vendor.py)
        pinned_key(name="Grafana signing key", path=KEY, url=g.key_url, fingerprint=grafana_fingerprint(cluster),
                   what="Grafana's apt key", dearmor=False, want=WANT)
        source = operations.managed_file(name="Grafana apt source", path=SOURCE, want=WANT,
                                         content=source_text(g.repo_url))
        operations.run_when_changed(name="apt lists refreshed (Grafana source)", description="apt-get update",
                                    commands=["DEBIAN_FRONTEND=noninteractive apt-get update -q"], _if=source.did_change)
    if g.version:
        operations.managed_file(name="Grafana version pin", path=PIN, want=WANT, content=grafana_pin(g.version))
    operations.packages(name="Grafana installed", names=[f"grafana={g.version}" if g.version else "grafana"], want=WANT)
    password = secret_text(cluster.state_dir, "grafana-admin-password", 24)
    changed = [operations.managed_file(name=INI, path=INI, want=WANT, mode="640", group="grafana", secret=True,
                                content=render_ini(cluster, node.address, password),
                                disruption="restart grafana-server"),
               operations.managed_file(name="Grafana datasource", path=DATASOURCE, want=WANT, mode="640", group="grafana",
                                content=render_datasource(cluster), disruption="restart grafana-server"),
               operations.managed_file(name="Grafana dashboard provider", path=PROVIDER, want=WANT, mode="640",
                                group="grafana", content=render_provider(), disruption="restart grafana-server")]
    operations.directory(name=DASHBOARD_DIR, path=DASHBOARD_DIR, want=WANT)
    for name, text in dashboards().items():  # re-read by Grafana every 10 s: no restart
        operations.managed_file(name=f"dashboard {name}", path=f"{DASHBOARD_DIR}/{name}", want=WANT, content=text)
    ready = http_ready(node.address, g.port, "/api/health")
    operations.restart_policy(name="Grafana restarted by systemd when it dies", unit="grafana-server", want=WANT, started_next=True)
    operations.service(name="Grafana running", unit="grafana-server", want=WANT, wait=ready)
    operations.restart(name="Grafana restarted (configuration changed)", unit="grafana-server", want=WANT, wait=ready,
                _if=AnyChanged(*changed))
