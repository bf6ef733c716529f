"""monitoring, declared as data (components/slurm.py): prometheus-node-exporter on every node (with corral's
textfile metrics and the systemd collector for the cluster's daemons); Prometheus, its alert rules and Alertmanager
on the `monitoring` node. All bind the node's cluster address (spec: monitoring.listen). Rendered files are checked
with promtool/amtool on the node before they replace the old ones."""

from __future__ import annotations

from corral.render import resources as r
from corral.render.alertmanager import render_alertmanager_yml
from corral.render.alerts import render_rules
from corral.render.prometheus import RULES_DIR, listen_address, listens_on, render_prometheus_yml
from corral.render.ready import http_ready
from corral.render.restart import POLICIES

NE_DEFAULT, TEXTFILE_DIR = "/etc/default/prometheus-node-exporter", "/var/lib/prometheus/node-exporter"
SPEC_PROM = f"{TEXTFILE_DIR}/corral-spec.prom"
PROM_DEFAULT, PROM_YML = "/etc/default/prometheus", "/etc/prometheus/prometheus.yml"
RULES = f"{RULES_DIR}/corral.yml"
AM_DEFAULT, AM_YML = "/etc/default/prometheus-alertmanager", "/etc/prometheus/alertmanager.yml"
# daemons whose state node-exporter reports (alerts: SlurmdDown, SlurmctldDown, SlurmdbdDown)
UNITS = "(slurmd|slurmctld|slurmdbd|munge|mariadb|prometheus|prometheus-alertmanager|corral-slurm-exporter)[.]service"
NE, PROM, AM = "prometheus-node-exporter", "prometheus", "prometheus-alertmanager"


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


def applies(cluster, node) -> bool:
    """Every node of a cluster with monitoring on and a monitoring node."""
    return cluster.spec.monitoring.enabled and bool(cluster.with_role("monitoring"))


def _node_exporter(cluster, node) -> list:
    m, on = cluster.spec.monitoring, listens_on(cluster)
    return [
        r.Packages((NE,), "node-exporter installed", "monitoring (every node)"),
        r.File(NE_DEFAULT, node_exporter_args(cluster, node), "node-exporter flags", disruption=f"restart {NE}"),
        r.File(SPEC_PROM, spec_metrics(node), "spec metrics for node-exporter"),
        r.Service(NE, "node-exporter running", http_ready(node.address, m.node_exporter_port, "/metrics"),
                  "node-exporter restarted (flags changed)", (NE_DEFAULT,), policy=POLICIES[NE],
                  policy_op="node-exporter restarted by systemd when it dies",
                  runs=r.Daemon(f"{NE}.service", "prometheus", "node metrics",
                                listens=(r.Listener(m.node_exporter_port, "Prometheus", on=on),))),
    ]


def _alertmanager(cluster, node) -> list:
    m, on = cluster.spec.monitoring, listens_on(cluster)
    ready = http_ready(node.address, m.alertmanager_port, "/-/ready")
    return [
        r.Packages((AM,), "Alertmanager installed", "role monitoring"),
        r.File(AM_YML, render_alertmanager_yml(cluster), "alertmanager.yml (receivers)",
               disruption="reload alertmanager", validate="amtool check-config {}"),
        r.File(AM_DEFAULT, alertmanager_flags(cluster, node), "Alertmanager flags", disruption=f"restart {AM}"),
        r.Service(AM, "Alertmanager running", ready, policy=POLICIES[AM],
                  policy_op="Alertmanager restarted by systemd when it dies",
                  runs=r.Daemon(f"{AM}.service", "prometheus", "Alertmanager (no gossip port)",
                                listens=(r.Listener(m.alertmanager_port, "Prometheus, admins", on=on),))),
        r.Restart(AM, "Alertmanager reloaded (receivers changed)", (AM_YML,), verb="reload"),
        r.Restart(AM, "Alertmanager restarted (flags changed)", (AM_DEFAULT,), ready),
    ]


def _prometheus(cluster, node) -> list:
    m, on = cluster.spec.monitoring, listens_on(cluster)
    ready = http_ready(node.address, m.prometheus_port, "/-/ready")
    return [
        r.Packages((PROM,), "Prometheus installed", "role monitoring"),
        r.Directory(RULES_DIR),
        r.File(RULES, render_rules(cluster), "alert rules", disruption="reload prometheus",
               validate="promtool check rules {}"),
        r.File(PROM_YML, render_prometheus_yml(cluster), "prometheus.yml (scrape config)",
               disruption="reload prometheus", validate="promtool check config --syntax-only {}"),
        r.File(PROM_DEFAULT, prometheus_flags(cluster, node), "Prometheus flags", disruption="restart prometheus"),
        r.Service(PROM, "Prometheus running", ready, policy=POLICIES[PROM],
                  policy_op="Prometheus restarted by systemd when it dies",
                  runs=r.Daemon(f"{PROM}.service", "prometheus", "Prometheus",
                                listens=(r.Listener(m.prometheus_port, "admins, Grafana, `corral report`", on=on),))),
        r.Restart(PROM, "Prometheus reloaded (scrape config or rules changed)", (PROM_YML, RULES), ready,
                  verb="reload"),
        r.Restart(PROM, "Prometheus restarted (flags changed)", (PROM_DEFAULT,), ready),
    ]


def resources(cluster, node) -> list:
    out = _node_exporter(cluster, node)
    if "monitoring" in node.roles:
        out += _alertmanager(cluster, node) + _prometheus(cluster, node)
    return out
