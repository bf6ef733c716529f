"""monitoring: prometheus-node-exporter on every node (with corral's textfile metrics and the
systemd collector for the cluster's daemons); Prometheus, its alert rules and Alertmanager on the
`monitoring` node. All bind the node's cluster address (spec: monitoring.listen). Rendered files
are checked with promtool/amtool on the node before they replace the old ones."""

from __future__ import annotations

from pyinfra import host
from pyinfra.api import deploy

from corral.deploy import operations
from corral.deploy.nodestate import Want, register
from corral.engine.conditions import AnyChanged
from corral.render.alertmanager import render_alertmanager_yml
from corral.render.alerts import render_rules
from corral.render.prometheus import RULES_DIR, listen_address, render_prometheus_yml
from corral.render.ready import http_ready  # noqa: F401 (the deploys' readiness tests import it from here too)
from corral.render.restart import dropin_path

NE_DEFAULT, TEXTFILE_DIR = "/etc/default/prometheus-node-exporter", "/var/lib/prometheus/node-exporter"
SPEC_PROM = f"{TEXTFILE_DIR}/corral-spec.prom"
PROM_DEFAULT, PROM_YML = "/etc/default/prometheus", "/etc/prometheus/prometheus.yml"
RULES = f"{RULES_DIR}/corral.yml"
AM_DEFAULT, AM_YML = "/etc/default/prometheus-alertmanager", "/etc/prometheus/alertmanager.yml"
# daemons whose state node-exporter reports (alerts: SlurmdDown, SlurmctldDown, SlurmdbdDown)
UNITS = "(slurmd|slurmctld|slurmdbd|munge|mariadb|prometheus|prometheus-alertmanager|corral-slurm-exporter)[.]service"
NE_WANT = register(Want(paths=(NE_DEFAULT, SPEC_PROM, dropin_path("prometheus-node-exporter")),
                        services=("prometheus-node-exporter",),
                        packages=("prometheus-node-exporter",)))
PROM_WANT = register(Want(paths=(PROM_DEFAULT, PROM_YML, RULES_DIR, RULES, dropin_path("prometheus")),
                          services=("prometheus",),
                          packages=("prometheus",)))
AM_WANT = register(Want(paths=(AM_DEFAULT, AM_YML, dropin_path("prometheus-alertmanager")),
                        services=("prometheus-alertmanager",),
                        packages=("prometheus-alertmanager",)))


def spec_metrics(node) -> str:
    """What the spec declares for this node, for rules that compare it with what is found."""
    return ("# HELP corral_node_gpus_expected GPUs the spec declares for this node (corral)\n"
            "# TYPE corral_node_gpus_expected gauge\n"
            f"corral_node_gpus_expected {node.gpu_count}\n")


def node_exporter_args(cluster, node) -> str:
    m = cluster.spec.monitoring
    return ("# Managed by corral\n"
            f'ARGS="--web.listen-address={listen_address(cluster, node.address, m.node_exporter_port)} '
            f"--collector.textfile.directory={TEXTFILE_DIR} --collector.systemd "
            "--collector.systemd.enable-restarts-metrics "
            f'--collector.systemd.unit-include={UNITS}"\n')


def prometheus_flags(cluster, node) -> str:
    """/etc/default/prometheus: where Prometheus listens, how long it keeps its data."""
    m = cluster.spec.monitoring
    args = (f'ARGS="--web.listen-address={listen_address(cluster, node.address, m.prometheus_port)} '
            f'--storage.tsdb.retention.time={m.retention_days}d"\n')
    return "# Managed by corral\n" + args


def alertmanager_flags(cluster, node) -> str:
    """/etc/default/prometheus-alertmanager: where Alertmanager listens, no gossip port."""
    m = cluster.spec.monitoring
    # --cluster.listen-address= : no gossip port (it would listen on 0.0.0.0:9094)
    args = (f'ARGS="--web.listen-address={listen_address(cluster, node.address, m.alertmanager_port)} '
            '--cluster.listen-address= --storage.path=/var/lib/prometheus/alertmanager"\n')
    return "# Managed by corral\n" + args


def _node_exporter(cluster, node) -> None:
    m = cluster.spec.monitoring
    ready = http_ready(node.address, m.node_exporter_port, "/metrics")
    operations.packages(name="node-exporter installed", names=["prometheus-node-exporter"], want=NE_WANT, together=True)
    flags = operations.managed_file(name="node-exporter flags", path=NE_DEFAULT, want=NE_WANT,
                             content=node_exporter_args(cluster, node), disruption="restart prometheus-node-exporter")
    operations.managed_file(name="spec metrics for node-exporter", path=SPEC_PROM, want=NE_WANT, content=spec_metrics(node))
    operations.restart_policy(name="node-exporter restarted by systemd when it dies", unit="prometheus-node-exporter",
                              want=NE_WANT, started_next=True)
    operations.service(name="node-exporter running", unit="prometheus-node-exporter", want=NE_WANT, wait=ready)
    operations.restart(name="node-exporter restarted (flags changed)", unit="prometheus-node-exporter",
                want=NE_WANT, wait=ready, _if=flags.did_change)


def _prometheus(cluster, node) -> None:
    m = cluster.spec.monitoring
    ready = http_ready(node.address, m.prometheus_port, "/-/ready")
    operations.packages(name="Prometheus installed", names=["prometheus"], want=PROM_WANT, together=True)
    operations.directory(name=RULES_DIR, path=RULES_DIR, want=PROM_WANT)
    rules = operations.managed_file(name="alert rules", path=RULES, want=PROM_WANT, content=render_rules(cluster),
                             disruption="reload prometheus", validate="promtool check rules {}")
    conf = operations.managed_file(name="prometheus.yml (scrape config)", path=PROM_YML, want=PROM_WANT,
                            content=render_prometheus_yml(cluster), disruption="reload prometheus",
                            validate="promtool check config --syntax-only {}")
    flags = operations.managed_file(name="Prometheus flags", path=PROM_DEFAULT, want=PROM_WANT,
                             content=prometheus_flags(cluster, node), disruption="restart prometheus")
    operations.restart_policy(name="Prometheus restarted by systemd when it dies", unit="prometheus", want=PROM_WANT, started_next=True)
    operations.service(name="Prometheus running", unit="prometheus", want=PROM_WANT, wait=ready)
    operations.reload(name="Prometheus reloaded (scrape config or rules changed)", unit="prometheus", want=PROM_WANT,
                      wait=ready, _if=AnyChanged(conf, rules))
    operations.restart(name="Prometheus restarted (flags changed)", unit="prometheus", want=PROM_WANT,
                wait=ready, _if=flags.did_change)


def _alertmanager(cluster, node) -> None:
    m = cluster.spec.monitoring
    ready = http_ready(node.address, m.alertmanager_port, "/-/ready")
    operations.packages(name="Alertmanager installed", names=["prometheus-alertmanager"], want=AM_WANT, together=True)
    conf = operations.managed_file(name="alertmanager.yml (receivers)", path=AM_YML, want=AM_WANT,
                            content=render_alertmanager_yml(cluster), disruption="reload alertmanager",
                            validate="amtool check-config {}")
    flags = operations.managed_file(name="Alertmanager flags", path=AM_DEFAULT, want=AM_WANT,
                             content=alertmanager_flags(cluster, node), disruption="restart prometheus-alertmanager")
    operations.restart_policy(name="Alertmanager restarted by systemd when it dies", unit="prometheus-alertmanager",
                              want=AM_WANT, started_next=True)
    operations.service(name="Alertmanager running", unit="prometheus-alertmanager", want=AM_WANT, wait=ready)
    operations.reload(name="Alertmanager reloaded (receivers changed)", unit="prometheus-alertmanager", want=AM_WANT,
                      _if=conf.did_change)
    operations.restart(name="Alertmanager restarted (flags changed)", unit="prometheus-alertmanager", want=AM_WANT,
                wait=ready, _if=flags.did_change)


@deploy("monitoring")
def monitoring() -> None:
    node, cluster = host.data.corral_node, host.data.corral_cluster
    if not cluster.spec.monitoring.enabled or not cluster.with_role("monitoring"):
        return
    _node_exporter(cluster, node)
    if "monitoring" in node.roles:
        _alertmanager(cluster, node)
        _prometheus(cluster, node)
