"""corral's Slurm exporter (corral/node/slurm_exporter.py, prometheus-client) as a systemd service on the first
controller, bound to its cluster address; Prometheus scrapes it as job `slurm` (render/prometheus.py). Declared as
data (`resources`, render/resources.py): the one generic deploy applies it, `corral render` writes its files, the
audit's declaration (components/daemons.py) reads the same names.

It answers anyone who reaches its port, so it runs as a user of its own (USER, made by systemd-sysusers from
corral's sysusers.d file), not as SlurmUser: slurm can read the BMC credentials (render/power.py, 0600 slurm:slurm)
and is Slurm's own super-user. sinfo, squeue, sdiag, scontrol ping and sacctmgr show answer an ordinary user (unless
slurm.conf's PrivateData hides jobs or usage; see docs/components/monitoring.md). The unit confines it further: no
capabilities, no new privileges, a read-only system, no homes, its own /tmp and /dev."""

from __future__ import annotations

from corral import paths
from corral.render.restart import service_lines, unit_lines

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


def resources(cluster, node) -> list:
    """What the exporter's component installs on the first controller (components/slurm.py gates it)."""
    from corral.render import resources as r
    from corral.render.node_programs import node_program
    from corral.render.prometheus import listen_address, listens_on
    from corral.render.ready import http_ready
    port = cluster.spec.monitoring.slurm_exporter_port
    ready, restart = http_ready(node.address, port, "/metrics"), f"restart {UNIT}"
    files = (SYSUSERS, *(f"{LIB}/{m}" for m in MODULES), UNIT_FILE)
    return [
        r.Packages(("python3-prometheus-client",), "prometheus-client installed", "monitoring (Slurm exporter)"),
        r.File(SYSUSERS, SYSUSERS_TEXT, disruption=restart),
        r.OnChange(f"user {USER} made", "systemd-sysusers", (SYSUSERS,), (("systemd-sysusers", SYSUSERS),)),
        r.Directory(LIB),
        *(r.File(f"{LIB}/{m}", node_program(m), disruption=restart) for m in MODULES),
        r.File(UNIT_FILE, unit(listen_address(cluster, node.address, port)), disruption=restart),
        r.Service(UNIT, "Slurm exporter running", ready, "Slurm exporter restarted (program or unit changed)", files,
                  runs=r.Daemon(f"{UNIT}.service", USER, "corral's Slurm exporter, its own user",
                                listens=(r.Listener(port, "Prometheus", on=listens_on(cluster)),))),
    ]
