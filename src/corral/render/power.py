"""Power saving's text: the slurm.conf lines (render/slurm.py adds them) and power.json, the config of
corral's power programs on the controllers (node/power.py reads it; it holds no secret: the BMC
credentials are a file of their own, paths.BMC_CREDENTIALS).

The component, declared as data (components/slurm.py `resources`): with `power.enabled`, corral's power programs on
the controllers (Slurm's SuspendProgram, ResumeProgram, ResumeFailProgram run there by slurmctld as SlurmUser): the
stdlib-only program and its Redfish client (node/power.py, node/power_redfish.py), three wrappers in /usr/local/sbin
(0755 root: slurmctld refuses a program others could write), power.json (each node's BMC; no secret) and the BMC
credentials (0600 slurm:slurm: only slurmctld's programs read them; plan shows no content). It comes before the slurm
controller's component, so slurm.conf never names a program that is not there; slurmctld (whose package makes the
slurm user) is installed first. power.enabled false: nothing is done and nothing removed (slurm.conf no longer names
the programs)."""

from __future__ import annotations

import json

from corral import paths
from corral.render import resources as r
from corral.render.hw import hostlist
from corral.render.node_programs import node_program
from corral.secrets import admin_secret_text
from corral.spec.cluster import Cluster
from corral.spec.rules_power import bmc_urls, credentials_path, excluded

RESUME_FAIL_REASON = "corral: power: resume failed"


def slurm_lines(cluster: Cluster) -> list[str]:
    """SuspendProgram & co. when power.enabled, else nothing (Slurm's default: no power saving).
    Enabling or disabling it takes a slurmctld restart (deploy/slurm.py STRUCTURAL)."""
    power = cluster.spec.power
    if not power.enabled:
        return []
    out = ["", f"# Power saving: idle nodes powered off through their BMCs ({power.bmc.protocol}), on for a job",
           f"SuspendProgram={paths.POWER_SUSPEND}", f"ResumeProgram={paths.POWER_RESUME}",
           f"ResumeFailProgram={paths.POWER_RESUME_FAIL}", f"SuspendTime={power.suspend_after}",
           f"SuspendTimeout={power.suspend_timeout}", f"ResumeTimeout={power.resume_timeout}"]
    never = excluded(cluster)
    if never:
        out.append(f"SuspendExcNodes={hostlist(never)}")
    return out


def power_config(cluster: Cluster) -> str:
    """power.json: each node's BMC, the bound of one BMC call, TLS checking, where to log."""
    bmc = cluster.spec.power.bmc
    data = {"nodes": bmc_urls(cluster), "protocol": bmc.protocol, "timeout_s": bmc.timeout_s,
            "verify_tls": bmc.verify_tls, "credentials_file": paths.BMC_CREDENTIALS, "log_file": paths.POWER_LOG,
            "resume_fail_reason": RESUME_FAIL_REASON}
    return json.dumps(data, indent=1, sort_keys=True) + "\n"


MODULES = ("power.py", "power_redfish.py")
WRAPPERS = {paths.POWER_SUSPEND: "suspend", paths.POWER_RESUME: "resume", paths.POWER_RESUME_FAIL: "resume-fail"}


def wrapper(action: str) -> str:
    return (f"#!/bin/sh\n# Managed by corral: Slurm's power saving ({action})\n"
            f"exec /usr/bin/python3 {paths.LIB}/power.py {action} \"$@\"\n")


def credentials(cluster) -> str:
    """The admin's `user:password` file, read bounded (secrets.admin_secret_text); only its first line."""
    text = admin_secret_text(credentials_path(cluster), "BMC credentials")
    return text.splitlines()[0] + "\n"


def resources(cluster, node) -> list:
    """What the power component installs on a controller (components/gates.py power gates it)."""
    secret = r.Made(lambda: credentials(cluster), "", where=f"power.bmc.credentials_file={credentials_path(cluster)}")
    return [
        r.Packages(("slurmctld",), "slurmctld installed (the slurm user runs the power programs)",
                   "power (the slurm user runs the power programs)"),
        r.Directory(paths.LIB),
        *(r.File(f"{paths.LIB}/{m}", node_program(m)) for m in MODULES),
        *(r.File(path, wrapper(action), mode="755") for path, action in WRAPPERS.items()),
        r.File(paths.POWER_CONFIG, power_config(cluster)),
        r.File(paths.BMC_CREDENTIALS, secret, f"{paths.BMC_CREDENTIALS} (secret)", mode="600", user="slurm",
               group="slurm", secret=True),
    ]
