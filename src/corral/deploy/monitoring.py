"""monitoring: prometheus-node-exporter on every node; Prometheus on the `monitoring` node with a
scrape config rendered from the spec. Both bind the node's cluster address (spec: monitoring.listen)."""

from __future__ import annotations

from pyinfra import host
from pyinfra.api import deploy

from corral.deploy import ops
from corral.deploy.nodestate import Want, register
from corral.render.prometheus import listen_address, render_prometheus_yml

NE_DEFAULT, PROM_DEFAULT, PROM_YML = ("/etc/default/prometheus-node-exporter", "/etc/default/prometheus",
                                      "/etc/prometheus/prometheus.yml")
NE_WANT = register(Want(paths=(NE_DEFAULT,), services=("prometheus-node-exporter",),
                        packages=("prometheus-node-exporter",)))
PROM_WANT = register(Want(paths=(PROM_DEFAULT, PROM_YML), services=("prometheus",), packages=("prometheus",)))


def _http_ready(address: str, port: int, path: str) -> str:
    target = f"[{address}]" if ":" in address else address
    return (f"python3 -c \"import urllib.request,sys; urllib.request.urlopen('http://{target}:{port}{path}', "
            "timeout=2)\"")


@deploy("monitoring")
def monitoring() -> None:
    node, cluster = host.data.corral_node, host.data.corral_cluster
    m = cluster.spec.monitoring
    if not m.enabled or not cluster.with_role("monitoring"):
        return
    ne_args = f'ARGS="--web.listen-address={listen_address(cluster, node.address, m.node_exporter_port)}"\n'
    ne_ready = _http_ready(node.address, m.node_exporter_port, "/metrics")
    ops.packages(name="node-exporter installed", names=["prometheus-node-exporter"], want=NE_WANT)
    ne = ops.managed_file(name="node-exporter listen address", path=NE_DEFAULT, want=NE_WANT,
                          content="# Managed by corral\n" + ne_args, disruption="restart prometheus-node-exporter")
    ops.service(name="node-exporter running", unit="prometheus-node-exporter", want=NE_WANT, wait=ne_ready)
    ops.restart(name="node-exporter restarted (listen address changed)", unit="prometheus-node-exporter",
                want=NE_WANT, wait=ne_ready, _if=ne.did_change)
    if "monitoring" not in node.roles:
        return
    ready = _http_ready(node.address, m.prometheus_port, "/-/ready")
    args = (f'ARGS="--web.listen-address={listen_address(cluster, node.address, m.prometheus_port)} '
            '--storage.tsdb.retention.time=15d"\n')
    ops.packages(name="Prometheus installed", names=["prometheus"], want=PROM_WANT)
    conf = ops.managed_file(name="prometheus.yml (scrape config)", path=PROM_YML, want=PROM_WANT,
                            content=render_prometheus_yml(cluster), disruption="reload prometheus")
    flags = ops.managed_file(name="Prometheus listen address", path=PROM_DEFAULT, want=PROM_WANT,
                             content="# Managed by corral\n" + args, disruption="restart prometheus")
    ops.service(name="Prometheus running", unit="prometheus", want=PROM_WANT, wait=ready)
    ops.run_when_changed(name="Prometheus reloaded (scrape config changed)", description="reload",
                         commands=["systemctl reload prometheus"], disruption="reload prometheus",
                         _if=conf.did_change)
    ops.restart(name="Prometheus restarted (listen address changed)", unit="prometheus", want=PROM_WANT,
                wait=ready, _if=flags.did_change)
