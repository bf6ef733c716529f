"""power: with `power.enabled`, corral's power programs on the controllers (Slurm's SuspendProgram,
ResumeProgram, ResumeFailProgram run there by slurmctld as SlurmUser; render/power.py names them in
slurm.conf): the stdlib-only program and its Redfish client (node/power.py, node/power_redfish.py),
three wrappers in /usr/local/sbin (0755 root: slurmctld refuses a program others could write), power.json
(each node's BMC; no secret) and the BMC credentials (0600 slurm:slurm: only slurmctld's programs read
them; plan shows no content). Runs before the slurm controller deploy, so that slurm.conf never names a
program that is not there; slurmctld (whose package makes the slurm user) is installed first.

power.enabled false: nothing is done and nothing removed (slurm.conf no longer names the programs).
"""

from __future__ import annotations

from pyinfra import host
from pyinfra.api import deploy

from corral import paths
from corral.components import gates
from corral.deploy import operations
from corral.deploy.nodestate import Want, register
from corral.render.node_programs import node_program
from corral.render.power import power_config
from corral.secrets import admin_secret_text
from corral.spec.rules_power import credentials_path

MODULES = ("power.py", "power_redfish.py")
WRAPPERS = {paths.POWER_SUSPEND: "suspend", paths.POWER_RESUME: "resume", paths.POWER_RESUME_FAIL: "resume-fail"}
WANT = register(Want(paths=(paths.LIB, *(f"{paths.LIB}/{m}" for m in MODULES), *WRAPPERS, paths.POWER_CONFIG,
                            paths.BMC_CREDENTIALS), packages=("slurmctld",)))


def wrapper(action: str) -> str:
    return (f"#!/bin/sh\n# Managed by corral: Slurm's power saving ({action})\n"
            f"exec /usr/bin/python3 {paths.LIB}/power.py {action} \"$@\"\n")


def credentials(cluster) -> str:
    """The admin's `user:password` file, read bounded (secrets.admin_secret_text); only its first line."""
    text = admin_secret_text(credentials_path(cluster), "BMC credentials")
    return text.splitlines()[0] + "\n"


@deploy("power")
def power() -> None:
    node, cluster = host.data.corral_node, host.data.corral_cluster
    if not gates.power(cluster, node):  # the declaration's gate (components/slurm.py)
        return
    operations.packages(name="slurmctld installed (the slurm user runs the power programs)", names=["slurmctld"],
                        want=WANT, together=True)
    operations.directory(name=paths.LIB, path=paths.LIB, want=WANT)
    for module in MODULES:
        operations.managed_file(name=f"{paths.LIB}/{module}", path=f"{paths.LIB}/{module}",
                                content=node_program(module), want=WANT)
    for path, action in WRAPPERS.items():
        operations.managed_file(name=path, path=path, content=wrapper(action), mode="755", want=WANT)
    operations.managed_file(name=paths.POWER_CONFIG, path=paths.POWER_CONFIG, content=power_config(cluster), want=WANT)
    operations.managed_file(name=f"{paths.BMC_CREDENTIALS} (secret)", path=paths.BMC_CREDENTIALS,
                            content=credentials(cluster), mode="600", user="slurm", group="slurm", secret=True,
                            want=WANT)
