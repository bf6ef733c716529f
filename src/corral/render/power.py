"""Power saving's text: the slurm.conf lines (render/slurm.py adds them) and power.json, the config of
corral's power programs on the controllers (node/power.py reads it; it holds no secret: the BMC
credentials are a file of their own, paths.BMC_CREDENTIALS)."""

from __future__ import annotations

import json

from corral import paths
from corral.render.hw import hostlist
from corral.spec.cluster import Cluster
from corral.spec.rules_power import bmc_urls, excluded

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
