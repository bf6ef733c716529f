"""slurm_exporter: corral's Slurm exporter (corral/node/slurm_exporter.py, prometheus-client) as a
systemd service on the first controller, bound to its cluster address; Prometheus scrapes it as
job `slurm` (render/prometheus.py).

It answers anyone who reaches its port, so it runs as a user of its own (USER, made by
systemd-sysusers from corral's sysusers.d file), not as SlurmUser: slurm can read the BMC credentials
(deploy/power.py, 0600 slurm:slurm) and is Slurm's own super-user. sinfo, squeue, sdiag, scontrol ping
and sacctmgr show answer an ordinary user (unless slurm.conf's PrivateData hides jobs or usage; see
docs/components/monitoring.md). The unit confines it further: no capabilities, no new privileges, a
read-only system, no homes, its own /tmp and /dev."""

from __future__ import annotations

from pyinfra import host
from pyinfra.api import deploy

from corral.deploy import operations
from corral.deploy.monitoring import http_ready
from corral.deploy.nodestate import Want, register
from corral.engine.conditions import AnyChanged
from corral.engine.shell import cmd
from corral.render.node_programs import node_program
from corral.render.prometheus import listen_address
from corral.render.slurm_exporter import LIB, MODULES, SYSUSERS, SYSUSERS_TEXT, UNIT, UNIT_FILE, USER, unit

WANT = register(Want(paths=(LIB, *(f"{LIB}/{m}" for m in MODULES), UNIT_FILE, SYSUSERS), services=(UNIT,),
                     packages=("python3-prometheus-client",)))


@deploy("slurm exporter")
def slurm_exporter() -> None:
    node, cluster = host.data.corral_node, host.data.corral_cluster
    m = cluster.spec.monitoring
    controllers = cluster.with_role("controller")
    if not m.enabled or not cluster.with_role("monitoring") or not controllers or node.name != controllers[0].name:
        return
    ready = http_ready(node.address, m.slurm_exporter_port, "/metrics")
    operations.packages(name="prometheus-client installed", names=["python3-prometheus-client"], want=WANT, together=True)
    account = operations.managed_file(name=SYSUSERS, path=SYSUSERS, content=SYSUSERS_TEXT, want=WANT,
                                      disruption=f"restart {UNIT}")
    operations.run_when_changed(name=f"user {USER} made", description="systemd-sysusers", commands=[cmd("systemd-sysusers", SYSUSERS)],
                                _if=AnyChanged(account))
    operations.directory(name=LIB, path=LIB, want=WANT)
    changed = [account] + [operations.managed_file(name=f"{LIB}/{name}", path=f"{LIB}/{name}", want=WANT,
                                content=node_program(name), disruption=f"restart {UNIT}")
               for name in MODULES]
    changed.append(operations.managed_file(name=UNIT_FILE, path=UNIT_FILE, want=WANT, disruption=f"restart {UNIT}",
                                    content=unit(listen_address(cluster, node.address, m.slurm_exporter_port))))
    operations.service(name="Slurm exporter running", unit=UNIT, want=WANT, wait=ready)
    operations.restart(name="Slurm exporter restarted (program or unit changed)", unit=UNIT, want=WANT, wait=ready,
                _if=AnyChanged(*changed))
