"""slurm.version: the apt pin on every Slurm node (controller, accounting, compute, login), and a
node running another version marked for the upgrade (workflows/slurm_upgrade.py: backup, slurmdbd,
slurmctld, then slurmd under the rollout policy). A downgrade or a jump Slurm does not support
(spec/slurm_releases.py) is this node's error naming slurm.version, before anything changes.
Unset: nothing (the distribution's version, no pin)."""

from __future__ import annotations

import hashlib

from pyinfra import host
from pyinfra.api import deploy, operation

from corral.deploy import operations
from corral.deploy.installs import installs
from corral.deploy.nodestate import Want, register, snapshot
from corral.engine.handoff import SLURM, Handoff
from corral.engine.notes import annotate
from corral.engine.shell import cmd
from corral.errors import CorralError
from corral.facts.slurm import VERSION_PACKAGES, installed_in
from corral.render.slurm_pin import PIN, pin_text
from corral.spec.slurm_releases import matches, refusal

UPGRADE = "slurm upgrade"
WANT = register(Want(paths=(PIN,), packages=VERSION_PACKAGES))
ROLES = ("controller", "accounting", "compute", "login")


@installs(lambda version, **_: {PIN: pin_text(version)})
@operation()
def slurm_pin(version: str, node: str, clean_jobs: bool = False):
    snap = snapshot(WANT)
    installed = installed_in(snap.packages)
    if installed:
        refused = refusal(node, installed, version, clean_jobs)  # clean_jobs: its key changes at 25.11
        if refused:
            raise CorralError(refused[0], fix=refused[1])  # the message names slurm.version, the node, both versions
        if not matches(installed, version):
            annotate(disruption=UPGRADE, diff=f"Slurm {installed} -> {version}\n(after the other components: "
                                              "backup, slurmdbd, slurmctld, then slurmd under the rollout policy)\n",
                     rollout=Handoff(SLURM, installed, version))
            yield cmd("echo", f"Slurm {installed} -> {version}: upgraded after the other components, in Slurm's order")
            return
    text = pin_text(version)
    if (snap.files.get(PIN) or {}).get("sha256") == hashlib.sha256(text.encode()).hexdigest():
        host.noop(f"Slurm {installed or version} pinned at {version}")
        return
    annotate(disruption="none", diff=f"{PIN}: Slurm held at {version}\n")
    yield from operations.install_commands(PIN, text.encode(), "644", "root", "root")  # the text: render/slurm_pin.py


@deploy("slurm version")
def slurm_version() -> None:
    node, cluster = host.data.corral_node, host.data.corral_cluster
    version = cluster.spec.slurm.version
    if version is None or not set(node.roles) & set(ROLES):
        return
    slurm_pin(name="Slurm version pinned", version=version, node=node.name,
               clean_jobs=cluster.spec.slurm.clean_jobs)
