"""slurm_exporter: corral's Slurm exporter (corral/node/slurm_exporter.py, prometheus-client) as a
systemd service on the first controller, bound to its cluster address; Prometheus scrapes it as
job `slurm` (render/prometheus.py)."""

from __future__ import annotations

from pyinfra import host
from pyinfra.api import deploy

from corral.deploy import operations
from corral.deploy.monitoring import http_ready
from corral.deploy.nodestate import Want, register
from corral.engine.conditions import AnyChanged
from corral.render.node_programs import node_program
from corral.render.prometheus import listen_address
from corral.render.restart import service_lines, unit_lines
from corral import paths

LIB = paths.LIB
MODULES = ("slurm_exporter.py", "slurm_exporter_parse.py")
UNIT = "corral-slurm-exporter"
UNIT_FILE = f"/etc/systemd/system/{UNIT}.service"
WANT = register(Want(paths=(LIB, *(f"{LIB}/{m}" for m in MODULES), UNIT_FILE), services=(UNIT,),
                     packages=("python3-prometheus-client",)))


def unit(listen: str) -> str:
    """corral's own unit: its restart policy (render/restart.py) is part of it."""
    start_limit, restart = "\n".join(unit_lines(UNIT)), "\n".join(service_lines(UNIT))
    return f"""# Managed by corral
[Unit]
Description=corral Slurm exporter (Prometheus metrics from sinfo, squeue, sdiag, scontrol, sacctmgr)
After=munge.service slurmctld.service
{start_limit}

[Service]
User=slurm
ExecStart=/usr/bin/python3 {LIB}/slurm_exporter.py --listen {listen}
{restart}
NoNewPrivileges=yes
ProtectSystem=strict
ProtectHome=yes
PrivateTmp=yes

[Install]
WantedBy=multi-user.target
"""


@deploy("slurm exporter")
def slurm_exporter() -> None:
    node, cluster = host.data.corral_node, host.data.corral_cluster
    m = cluster.spec.monitoring
    controllers = cluster.with_role("controller")
    if not m.enabled or not cluster.with_role("monitoring") or not controllers or node.name != controllers[0].name:
        return
    ready = http_ready(node.address, m.slurm_exporter_port, "/metrics")
    operations.packages(name="prometheus-client installed", names=["python3-prometheus-client"], want=WANT, together=True)
    operations.directory(name=LIB, path=LIB, want=WANT)
    changed = [operations.managed_file(name=f"{LIB}/{name}", path=f"{LIB}/{name}", want=WANT,
                                content=node_program(name), disruption=f"restart {UNIT}")
               for name in MODULES]
    changed.append(operations.managed_file(name=UNIT_FILE, path=UNIT_FILE, want=WANT, disruption=f"restart {UNIT}",
                                    content=unit(listen_address(cluster, node.address, m.slurm_exporter_port))))
    operations.service(name="Slurm exporter running", unit=UNIT, want=WANT, wait=ready)
    operations.restart(name="Slurm exporter restarted (program or unit changed)", unit=UNIT, want=WANT, wait=ready,
                _if=AnyChanged(*changed))
