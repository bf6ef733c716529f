"""corral's Slurm exporter's unit and account, rendered (pure): deploy/slurm_exporter.py installs them, the
audit's declaration (components/daemons.py) and `corral render` read the same names."""

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
