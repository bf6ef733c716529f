"""mig: the MIG layout of `gpus.mig` on GPU compute nodes. nvidia-mig-parted (NVIDIA's
nvidia-mig-manager package) applies /etc/corral/mig-parted.json; corral-mig.service applies it again
at every boot, before slurmd (GPU instances do not survive a reboot). A layout that differs from the
node's MIG devices (its facts) is a change for the rollout (workflows/mig_rollout.py): drain, wait for
jobs, apply, verify, then Slurm's gres.conf/slurm.conf follow the node's new devices, resume.
With `apply --rollout-only NODES`, a node outside them whose layout differs is left as it is: one op
says "not in this rollout", and neither the config nor the boot-time unit is written or enabled there."""

from __future__ import annotations

import shlex

from pyinfra import host
from pyinfra.api import deploy, operation

from corral.engine.shell import cmd

from corral.components import gates
from corral.deploy import operations
from corral.engine.run_context import NOT_IN_ROLLOUT, current as run
from corral.deploy.nodestate import Want, register, register_for_run
from corral.engine.handoff import MIG, Handoff
from corral.engine.notes import annotate
from corral.deploy.containers import release_debs
from corral.render.containers import FETCH_PACKAGES
from corral.bundle.downloads import bundled
from corral.render.mig import CONFIG, SELECTED, differences, held_back, mig_parted_config

MIG_CHANGE = "drain + MIG reconfigure"
UNIT = "/etc/systemd/system/corral-mig.service"
TOOL = "/usr/bin/nvidia-mig-parted"
WANT = register(Want(paths=(CONFIG, UNIT, TOOL), services=("corral-mig",), packages=FETCH_PACKAGES))


def unit_text() -> str:
    return ("# Managed by corral: the MIG layout of cluster.yaml, applied at boot before slurmd\n"
            "[Unit]\nDescription=corral: MIG layout (nvidia-mig-parted)\n"
            "After=nvidia-persistenced.service\nBefore=slurmd.service\n\n"
            f"[Service]\nType=oneshot\nRemainAfterExit=yes\nExecStart={TOOL} apply -f {CONFIG} -c {SELECTED}\n\n"
            "[Install]\nWantedBy=multi-user.target\n")


def apply_command() -> str:
    return f"{TOOL} apply -f {shlex.quote(CONFIG)} -c {SELECTED}"


@operation()
def mig_layout(gpus, facts):
    """Nothing to do when the node's MIG devices are the spec's; else a change for the rollout."""
    diff = differences(gpus, facts)
    if not diff:
        host.noop("MIG layout as the spec says")
        return
    annotate(disruption=MIG_CHANGE, diff="".join(line + "\n" for line in diff)
             + "(drain, wait for jobs, nvidia-mig-parted apply, verify, Slurm follows, resume)\n",
             rollout=Handoff(MIG))
    yield cmd("echo", "MIG layout: applied by the rollout after the other components")


@deploy("mig")
def mig() -> None:
    node, cluster = host.data.corral_node, host.data.corral_cluster
    if not gates.mig(cluster, node):  # the declaration's gate (components/slurm.py)
        return
    facts = run().hw.get(node.name)
    held = held_back(node.gpus, facts, run().outside_rollout(node.name))
    if held:  # apply --rollout-only, another node: nothing written or enabled here, the layout as it is
        operations.skip(name="MIG layout", reason=f"{NOT_IN_ROLLOUT}: {held}")
        return
    tool = cluster.spec.nvidia.mig_parted
    if cluster.spec.virtual is not None:
        operations.skip(name="nvidia-mig-parted", reason="virtual cluster: the GPU emulation brings its stand-in")
    else:
        register_for_run(Want(packages=tuple(tool.packages)))
        operations.packages(name="download tools", names=list(FETCH_PACKAGES), want=WANT, together=True)
        release_debs(name=f"nvidia-mig-parted {tool.version}", label="mig-parted", sums_key="nvidia.mig_parted.sha256",
                     spec=bundled(cluster, ("nvidia", "mig_parted")), want=WANT)
    operations.managed_file(name=CONFIG, path=CONFIG, content=mig_parted_config(node.gpus), want=WANT)
    operations.managed_file(name="corral-mig.service (layout at boot)", path=UNIT, content=unit_text(), want=WANT)
    operations.service(name="corral-mig enabled", unit="corral-mig", running=False, want=WANT)
    mig_layout(name="MIG layout", gpus=node.gpus, facts=facts)
