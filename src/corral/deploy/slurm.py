"""Slurm from distribution packages, configless: slurmctld (+ slurm.conf, gres.conf, cgroup.conf)
on the controller, slurmd on compute nodes (fetching its configuration from slurmctld), client
tools and slurm.conf on login nodes.

Disruption rules: a slurm.conf change is taken with `scontrol reconfigure`; a change of the node
set, the controller hosts or the StateSaveLocation needs a slurmctld restart (then reconfigure, so
every slurmd re-reads it without restarting); slurmd restarts only when its own unit drop-in changed. The restart policies of
slurmctld and slurmd (render/restart.py: systemd restarts them when they die) are drop-ins of their
own: a change of one takes a `systemctl daemon-reload`, never a restart.
"""

from __future__ import annotations

from pyinfra import host
from pyinfra.api import deploy, operation
from pyinfra.facts.files import FileContents

from corral.components import gates
from corral.components.views import slurm_conf
from corral.components.slurm import COMPUTE, CONTROLLER, LOGIN
from corral.deploy import operations
from corral.deploy.context import slurm_version
from corral.engine.run_context import current as run
from corral.deploy.installs import installs
from corral.deploy.nodestate import Want, register, snapshot
from corral.deploy.slurm_ha import state_directory
from corral.deploy.slurm_guard import apply_or_rollback_script, backup_script
from corral.engine.conditions import AnyChanged
from corral.engine.shell import q, sh
from corral.errors import CorralError
from corral.render.cgroup import render_cgroup_conf
from corral.render import ctld_restart
from corral.render.node_programs import node_program
from corral.render.containers import PLUGSTACK, plugstack_conf
from corral.render.mig import gres_text
from corral.render.restart import dropin_path
from corral.render.gres import render_gres_conf
from corral.render.slurm import render_slurm_conf
from corral.render.storage import STATE_DROPIN
from corral.render.job_env import rdma_ports
from corral.render.topology import PATH as TOPOLOGY_CONF, topology_conf
from corral.render.job_container import MPI_PATH as MPI_CONF, PATH as JOB_CONTAINER_CONF, job_container_conf, mpi_conf
from corral.render.slurm_lint import lint_configs
from corral import paths

ETC = "/etc/slurm"
SLURM_CONF, GRES_CONF, CGROUP_CONF = f"{ETC}/slurm.conf", f"{ETC}/gres.conf", f"{ETC}/cgroup.conf"
LOGDIR = "/var/log/slurm"  # the StateSaveLocation: spec/shared.py state_save_location, made by deploy/slurm_ha.py
DROPIN = "/etc/systemd/system/slurmd.service.d/corral.conf"
SLURMD_STATE = paths.SLURMD_STATE  # what slurmd loads when it starts (SPANK plugins, GRES): a change restarts it
CTL_WANT = register(Want(paths=(SLURM_CONF, GRES_CONF, CGROUP_CONF, PLUGSTACK, TOPOLOGY_CONF, JOB_CONTAINER_CONF, MPI_CONF, LOGDIR, STATE_DROPIN,
                                 dropin_path("slurmctld"), ctld_restart.DROPIN, paths.LIB,
                                 *(f"{paths.LIB}/{m}" for m in ctld_restart.MODULES)),
                          services=("slurmctld",),
                packages=CONTROLLER))
NODE_WANT = register(Want(paths=(DROPIN, SLURMD_STATE, LOGDIR, "/var/lib/slurm/slurmd", dropin_path("slurmd")),
                           services=("slurmd",),
                 packages=COMPUTE))
FABRIC_WANT = register(Want(packages=("infiniband-diags",)))
PERF_WANT = register(Want(packages=("perftest",)))  # ib_write_bw: validate --fabric (checks/fabric.py)
# login nodes: the client tools, and what users need to make their Python environments (job clients)
LOGIN_WANT = register(Want(paths=(SLURM_CONF, PLUGSTACK), packages=LOGIN))
# answering a ping is not serving: with a backup controller, slurmctld answers pings while it still stands
# by (a slurmd asking for its configuration then falls to the standby backup and loops there); an RPC that
# only the active controller answers proves it serves
CTL_READY = "scontrol ping | grep -q 'is UP' && scontrol show partition >/dev/null"
CTL_LOGS = "tail -n 20 /var/log/slurm/slurmctld.log"
# what slurmctld takes only at a restart: the node set, the controllers, where its state is (a reconfigure
# would keep the old StateSaveLocation until the next restart, whenever that comes); power saving is
# switched on or off only by a restart (Slurm's power saving guide)
AUTH = ("AuthAltTypes=", "AuthAltParameters=")  # slurmctld loads its authentication plugins when it starts (slurm.rest)
STRUCTURAL = ("NodeName=", "SlurmctldHost=", "StateSaveLocation=", "SuspendProgram=", "TopologyPlugin=",
              "JobContainerType=", "NamespaceType=", *AUTH)


def _auth(text: str) -> list[str]:
    return sorted(line for line in text.splitlines() if line.startswith(AUTH))


def _structural(text: str) -> list[str]:
    return sorted(line for line in text.splitlines() if line.startswith(STRUCTURAL))


def _state_line(text: str) -> str | None:
    return next((line for line in text.splitlines() if line.startswith("StateSaveLocation=")), None)


def node_ready(name: str) -> str:
    """Shell test: the node is registered with slurmctld and responding."""
    return (f"s=$(scontrol show node -o {name} 2>/dev/null | grep -o 'State=[^ ]*'); [ -n \"$s\" ] && "
            f"! echo \"$s\" | grep -Eq 'DOWN|UNKNOWN|NOT_RESPONDING|FUTURE|[*]'")


def standby_ready(name: str) -> str:
    """Shell test: the controller `name`'s slurmctld answers `scontrol ping` (a standby backup serves no
    other RPC)."""
    return f"scontrol ping | grep -q {q(f'at {name} is UP')}"


@installs(lambda files, **_: files)
@operation()
def controller_config(files: dict[str, str], want: Want, backup: str | None = None):
    """slurm.conf, gres.conf, cgroup.conf, plugstack.conf; a running slurmctld takes the change by reconfigure, or by
    a restart when the node set, the controllers or the StateSaveLocation changed (Slurm 22.05 cannot add
    nodes by reconfigure). Refused, nothing
    uploaded, when the rendering does not lint clean (render/slurm_lint.py); a failed restart or reconfigure
    puts the previous files back and restarts slurmctld with them (deploy/slurm_guard.py).

    A backup controller (`backup`: its name, when it is not the first SlurmctldHost) is restarted whenever its files change and
    never reconfigures: a standby slurmctld reads its files when it starts, the primary's own op runs
    the cluster's one `scontrol reconfigure` (two at once, one from the freshly restarted standby, were
    seen to fail), and a backup that holds control (the primary down) takes it again after
    SlurmctldTimeout with the new files."""
    import hashlib
    problems = lint_configs(files)
    if problems:
        raise CorralError("refusing to install the Slurm configuration: " + "; ".join(problems[:5])
                          + (f" (and {len(problems) - 5} more)" if len(problems) > 5 else ""),
                          fix="a spec value holds a line break, '#', a quote or a setting of its own: correct it")
    snap = snapshot(want)
    changed = {p: c for p, c in files.items()
               if (snap.files.get(p) or {}).get("sha256") != hashlib.sha256(c.encode()).hexdigest()
               or (snap.files.get(p) or {}).get("mode") != "644"}
    if not changed:
        host.noop("slurm.conf, gres.conf, cgroup.conf, plugstack.conf up to date")
        return
    running = snap.services.get("slurmctld", ("", ""))[0] == "active"
    old = host.get_fact(FileContents, path=SLURM_CONF) if SLURM_CONF in changed else None
    restart = running and (
        CGROUP_CONF in changed or TOPOLOGY_CONF in changed or
        (SLURM_CONF in changed and _structural("\n".join(old or [])) != _structural(files[SLURM_CONF])))
    diffs = "".join(operations._diff(p, host.get_fact(FileContents, path=p) if p != SLURM_CONF else old, c)
                    for p, c in changed.items())
    moved = SLURM_CONF in changed and _state_line("\n".join(old or [])) not in (None, _state_line(files[SLURM_CONF]))
    why = ("cgroup.conf changed" if CGROUP_CONF in changed else
           "the network topology changed" if TOPOLOGY_CONF in changed else
           "StateSaveLocation changed: slurmctld starts from what is there" if moved else
           "AuthAltTypes changed: slurm.rest's JWTs" if _auth("\n".join(old or [])) != _auth(files.get(SLURM_CONF, ""))
           else "node set changed")
    label = (f"restart slurmctld, then reconfigure ({why})" if restart
             else "reconfigure" if running else "none (slurmctld not running yet)")
    if running and backup:
        label = "restart the standby slurmctld (the primary controller's op reconfigures the cluster)"
    operations.annotate(disruption=label, diff=diffs)
    if running:  # the files as they are go to <path>.corral-prev: a failed restart/reconfigure restores them
        yield sh(backup_script(list(changed)))
    for path, content in changed.items():
        yield from operations.install_commands(path, content.encode(), "644", "root", "root")
    if running and backup:
        ready = operations.readiness("slurmctld", standby_ready(backup), CTL_LOGS)
        yield sh(apply_or_rollback_script(list(changed), True, ready, CTL_LOGS, reconfigure=False))
    elif running:
        yield sh(apply_or_rollback_script(list(changed), restart, operations.readiness("slurmctld", CTL_READY, CTL_LOGS),
                                          CTL_LOGS))


def without_hooks(cluster, hw) -> list[str]:
    """Compute nodes that neither are in this run (jobhooks installs the hooks before slurm.conf is
    written) nor had them installed by an earlier run (their cached facts)."""
    in_run = run().in_run
    if in_run is None:
        return []
    return [n.name for n in cluster.with_role("compute")
            if n.name not in in_run and not (n.name in hw and hw[n.name].job_hooks)]


def configs(cluster, hw, version, fabric, without_hooks=()) -> dict[str, str]:
    """The controller's files (login nodes take slurm.conf and plugstack.conf), from the nodes' hardware
    facts, the Slurm version, the fabric read (deploy/fabric.py) and the compute nodes without job hooks."""
    return {SLURM_CONF: render_slurm_conf(cluster, hw, version=version, without_hooks=without_hooks, fabric=fabric,
                                          added=slurm_conf(cluster)),
            GRES_CONF: render_gres_conf(cluster, hw, version=version),
            CGROUP_CONF: render_cgroup_conf(cluster, version=version),
            PLUGSTACK: plugstack_conf(cluster.spec.nvidia.pyxis),
            **({TOPOLOGY_CONF: topology} if (topology := topology_conf(cluster, fabric)) else {}),
            **({JOB_CONTAINER_CONF: jc} if (jc := job_container_conf(cluster, version)) else {}),
            **({MPI_CONF: mpi} if (mpi := mpi_conf(cluster)) else {})}


def _configs(cluster) -> dict[str, str]:
    version, hw, fabric = slurm_version(), run().hw, run().fabric
    return configs(cluster, hw, version, fabric, without_hooks(cluster, hw))


def slurmd_state(cluster, node, facts) -> str:
    """What slurmd reads only when it starts: its SPANK plugins (plugstack.conf, the pyxis version),
    its GRES (MIG devices come and go with the layout) and its job container (slurm.clean_jobs): a change
    restarts slurmd. `facts`: the
    node's hardware facts (None: none known)."""
    p = cluster.spec.nvidia.pyxis
    gres = gres_text(node.gpus.model, node.gpus.count, facts) if node.gpus else "none"
    mig = "".join(f"# {d.profile} {d.files()}\n" for d in (facts.mig if facts else ()))
    clean = f"# clean jobs: {cluster.spec.slurm.job_tmp_path}\n" if cluster.spec.slurm.clean_jobs else ""  # job_container
    return plugstack_conf(p) + (f"# pyxis {p.version}\n" if p else "") + f"# gres {gres}\n" + mig + clean


@deploy("slurm controller")
def slurm_controller() -> None:
    node, cluster = host.data.corral_node, host.data.corral_cluster
    if not gates.controller(cluster, node):  # the declaration's gate (components/slurm.py)
        return
    operations.packages(name="slurmctld installed", names=list(CTL_WANT.packages), want=CTL_WANT, together=True)
    operations.directory(name=LOGDIR, path=LOGDIR, user="slurm", group="slurm", want=CTL_WANT)
    state_directory(cluster, CTL_WANT)  # local, or on a spec mount with slurmctld's RequiresMountsFor drop-in
    primary = cluster.with_role("controller")[0].name
    backup = node.name if node.name != primary else None
    controller_config(name="slurm.conf, gres.conf, cgroup.conf, plugstack.conf", files=_configs(cluster),
                      want=CTL_WANT, backup=backup)
    operations.restart_policy(name="slurmctld restarted by systemd when it dies", unit="slurmctld", want=CTL_WANT, started_next=True)
    operations.directory(name=paths.LIB, path=paths.LIB, want=CTL_WANT)
    for module in ctld_restart.MODULES:  # read at slurmctld's next start: no restart
        operations.managed_file(name=f"{paths.LIB}/{module}", path=f"{paths.LIB}/{module}", want=CTL_WANT,
                                content=node_program(module))
    operations.unit_dropin(name="slurmctld's restarts judged after each start (jobs an unclean end lost)",
                           unit="slurmctld", path=ctld_restart.DROPIN, content=ctld_restart.dropin_text(),
                           want=CTL_WANT, started_next=True)
    # a backup starts once the primary serves: started together, the primary's request that it stand down
    # found it waiting for the state's heartbeat and timed out (30 s at 24.11)
    operations.service(name="slurmctld running", unit="slurmctld", want=CTL_WANT, wait=CTL_READY, logs=CTL_LOGS,
                       first=(f"the primary controller {primary} serving", standby_ready(primary)) if backup else None)


def dropin(cluster, node) -> str:
    """slurmd unit drop-in: configless (--conf-server), the node's name, `--systemd` where the release's unit
    is Type=notify (spec/releases.py), and (virtual cluster only)
    the cgroup v1 controllers remounted read-write, which systemd-nspawn mounts read-only."""
    from corral.spec.releases import release
    servers = ",".join(f"{n.address}:6817" for n in cluster.with_role("controller"))
    # the release's unit is Type=notify: --systemd (foreground and READY=1; slurmd refuses it with -D)
    fg = "--systemd" if release(node.os).slurm_notify else "-D"
    lines = ["# Managed by corral", "[Unit]", "ConditionPathExists=", "", "[Service]", "ExecStart=",
             f"ExecStart=/usr/sbin/slurmd {fg} -s --conf-server {servers} -N {node.name} $SLURMD_OPTIONS"]
    if cluster.spec.virtual is not None:
        lines.append("ExecStartPre=/bin/sh -c 'for c in freezer cpuset devices cpu cpuacct memory pids; "
                     "do mount -o remount,bind,rw /sys/fs/cgroup/$$c; done'")
    return "\n".join(lines) + "\n"


@deploy("slurm compute")
def slurm_compute() -> None:
    node, cluster = host.data.corral_node, host.data.corral_cluster
    if not gates.compute(cluster, node):  # the declaration's gate (components/slurm.py)
        return
    logs = "tail -n 20 /var/log/slurm/slurmd.log; journalctl -u slurmd -n 10 --no-pager"
    operations.packages(name="slurmd installed", names=list(NODE_WANT.packages), want=NODE_WANT, together=True)
    t = cluster.spec.topology
    if t is not None and t.discover and not t.ibnetdiscover_file:  # what reads the fabric (deploy/fabric.py)
        operations.packages(name="infiniband-diags (topology.discover)", names=list(FABRIC_WANT.packages),
                            want=FABRIC_WANT, together=True)
    facts = run().hw.get(node.name)
    if facts is not None and rdma_ports(facts):  # a node with an active RDMA port
        operations.packages(name="perftest (validate --fabric)", names=list(PERF_WANT.packages), want=PERF_WANT,
                            together=True)
    operations.directory(name=LOGDIR, path=LOGDIR, user="slurm", group="slurm", want=NODE_WANT)
    # slurm:slurm as Debian's slurmd package leaves it at every configure (its postinst chowns it): an owner of
    # corral's own would be undone by each Slurm upgrade and redone by the next apply
    operations.directory(name="/var/lib/slurm/slurmd", path="/var/lib/slurm/slurmd", user="slurm", group="slurm",
                         want=NODE_WANT)
    unit = operations.managed_file(name="slurmd drop-in (configless)", path=DROPIN, content=dropin(cluster, node),
                            disruption="restart slurmd", want=NODE_WANT)
    spank = operations.managed_file(name="what slurmd loads at start (SPANK plugins, GRES)", path=SLURMD_STATE,
                             content=slurmd_state(cluster, node, facts), disruption="restart slurmd", want=NODE_WANT)
    # its own file, not corral.conf: a change of the restart policy takes a daemon-reload, never a slurmd restart
    operations.restart_policy(name="slurmd restarted by systemd when it dies", unit="slurmd", want=NODE_WANT, started_next=True)
    operations.service(name="slurmd running", unit="slurmd", want=NODE_WANT, wait=node_ready(node.name), logs=logs)
    operations.restart(name="slurmd restarted (drop-in, SPANK plugins or GRES changed)", unit="slurmd", want=NODE_WANT,
                wait=node_ready(node.name), logs=logs, _if=AnyChanged(unit, spank))


@deploy("slurm login")
def slurm_login() -> None:
    node, cluster = host.data.corral_node, host.data.corral_cluster
    if not gates.login_only(cluster, node):  # the declaration's gate (components/slurm.py)
        return
    operations.packages(name="slurm client and python3-venv installed", names=list(LOGIN_WANT.packages),
                        want=LOGIN_WANT, together=True)
    configs = _configs(cluster)
    operations.managed_file(name="slurm.conf", path=SLURM_CONF, content=configs[SLURM_CONF], want=LOGIN_WANT)
    operations.managed_file(name="plugstack.conf", path=PLUGSTACK, content=configs[PLUGSTACK], want=LOGIN_WANT)
