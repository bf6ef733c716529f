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
from corral.render.restart import service_lines, unit_lines
from corral import paths

LIB = paths.LIB
MODULES = ("slurm_exporter.py", "slurm_exporter_parse.py")
UNIT = "corral-slurm-exporter"
UNIT_FILE = f"/etc/systemd/system/{UNIT}.service"
USER = "corral-exporter"
SYSUSERS = f"/etc/sysusers.d/{USER}.conf"
SYSUSERS_TEXT = (f"# Managed by corral: the Slurm exporter's own user (no login, no home, no groups)\n"
                 f'u {USER} - "corral Slurm exporter" /nonexistent /usr/sbin/nologin\n')
# systemd's sandboxing as far as a systemd-nspawn node allows it (all of these work there)
HARDENING = """NoNewPrivileges=yes
CapabilityBoundingSet=
AmbientCapabilities=
ProtectSystem=strict
ProtectHome=yes
PrivateTmp=yes
PrivateDevices=yes
ProtectKernelTunables=yes
ProtectKernelModules=yes
ProtectKernelLogs=yes
ProtectControlGroups=yes
ProtectClock=yes
ProtectHostname=yes
RestrictSUIDSGID=yes
RestrictRealtime=yes
RestrictNamespaces=yes
LockPersonality=yes
RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6
SystemCallArchitectures=native
UMask=0077"""
WANT = register(Want(paths=(LIB, *(f"{LIB}/{m}" for m in MODULES), UNIT_FILE, SYSUSERS), services=(UNIT,),
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
User={USER}
Group={USER}
ExecStart=/usr/bin/python3 {LIB}/slurm_exporter.py --listen {listen}
{restart}
{HARDENING}

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
