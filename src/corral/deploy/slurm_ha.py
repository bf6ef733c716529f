"""Slurm high availability: what two controllers (primary and backup) sharing one StateSaveLocation
need, and where slurmctld's state directory is made.

slurm user (a deploy of its own, on each controller when there are two, before any Slurm package is
installed - accounting's slurmdbd and containers' build dependencies included): the user and group
`slurm` with Debian's fixed id 64030, made when missing. Debian's packages create it with that id
too, but keep a `slurm` that exists already (one made by hand, or by another distribution's rules),
and the state files on shared storage are the owner's alone: a different uid on the backup could not
write them. A `slurm` with another id fails the node, naming the id found and how to change it.

State directory (slurm controller): on the controller's local disk, a directory owned by slurm (the
node snapshot reads it); on a spec mount, made the same way after checking the mount is there (never
on the local disk underneath), read with a bounded stat (a hung NFS server must not hang the run), and
slurmctld gets a drop-in `RequiresMountsFor=` it (render/storage.py: state_dropin), removed again when
the state goes back to a local disk; a change of it takes a `systemctl daemon-reload`.
"""

from __future__ import annotations

from pyinfra import host
from pyinfra.api import deploy, operation

from corral.deploy import operations
from corral.deploy.nodestate import Want, register_for_run
from corral.deploy.storage import path_state
from corral.deploy.users import absent
from corral.engine.notes import annotate
from corral.engine.shell import cmd, q, sh
from corral.errors import CorralError
from corral.facts.accounts import SLURM_ID, SLURM_USER, Accounts, SlurmAccount
from corral.facts.storage import STAT_TIMEOUT_S, OwnedDir
from corral.render.storage import STATE_DROPIN, state_dropin
from corral.spec.shared import state_mount, state_save_location

NOLOGIN, HOME = "/usr/sbin/nologin", "/nonexistent"
STATE_MODE = "755"


def _fix(node: str) -> str:
    return (f"on {node}: stop slurmctld and slurmdbd, `groupmod -g {SLURM_ID} {SLURM_USER} && usermod -u {SLURM_ID} "
            f"-g {SLURM_ID} {SLURM_USER}`, chown -R {SLURM_USER}:{SLURM_USER} what it owned (/var/lib/slurm, "
            "/var/log/slurm, /etc/slurm/slurmdbd.conf, the StateSaveLocation), then apply again")


def plan_slurm_account(current: Accounts, node: str) -> list:
    """The commands that make group and user slurm with id 64030 ([]: both there with it). A slurm with
    another id, or 64030 held by another name, is a CorralError naming the node and what it found."""
    why = "two controllers share the StateSaveLocation, whose files only their owner's uid may write"
    user, group = current.passwd.get(SLURM_USER), current.groups.get(SLURM_USER)
    if user is not None and (user.uid, user.gid) != (SLURM_ID, SLURM_ID):
        raise CorralError(f"the {SLURM_USER} user on {node} has uid {user.uid} and gid {user.gid}, not {SLURM_ID} "
                          f"({why})", value=f"{user.uid}:{user.gid}", fix=_fix(node))
    if group is not None and group.gid != SLURM_ID:
        raise CorralError(f"the {SLURM_USER} group on {node} has gid {group.gid}, not {SLURM_ID} ({why})",
                          value=str(group.gid), fix=_fix(node))
    other_user, other_group = current.user_of_uid(SLURM_ID), current.group_of_gid(SLURM_ID)
    if user is None and other_user not in (None, SLURM_USER):
        raise CorralError(f"uid {SLURM_ID} (Debian's uid of {SLURM_USER}) belongs to {other_user} on {node}",
                          value=other_user, fix=f"give {other_user} another uid on {node}, then apply again")
    if group is None and other_group not in (None, SLURM_USER):
        raise CorralError(f"gid {SLURM_ID} (Debian's gid of {SLURM_USER}) belongs to group {other_group} on {node}",
                          value=other_group, fix=f"give group {other_group} another gid on {node}, then apply again")
    commands = []
    if group is None:
        commands.append(cmd("groupadd", "--system", "--gid", SLURM_ID, SLURM_USER))
    if user is None:
        commands.append(cmd("useradd", "--system", "--uid", SLURM_ID, "--gid", SLURM_USER, "--home-dir", HOME,
                            "--no-create-home", "--shell", NOLOGIN, "--comment", "Slurm workload manager",
                            SLURM_USER))
    return commands


@operation()
def slurm_account(node: str):
    """User and group slurm with uid and gid 64030 (plan_slurm_account)."""
    commands = plan_slurm_account(host.get_fact(SlurmAccount), node)
    if not commands:
        host.noop(f"user and group {SLURM_USER} have id {SLURM_ID}")
        return
    annotate(disruption="none", diff=f"+ {SLURM_USER} (uid and gid {SLURM_ID})\n")
    yield from commands


@deploy("slurm user")
def slurm_user() -> None:
    node, cluster = host.data.corral_node, host.data.corral_cluster
    if "controller" not in node.roles or len(cluster.with_role("controller")) < 2:
        return
    slurm_account(name=f"{SLURM_USER} user and group with id {SLURM_ID} (the same on both controllers)", node=node.name)


def make_state_script(path: str, mount: str) -> str:
    """The shared state directory made (or given to slurm) only while its mount is there; an NFS export
    that squashes root refuses it, and the script says what to do on the server."""
    absent_mount = f"corral: {mount} is not mounted: not making {path} on the local disk"
    refused = (f"corral: cannot make {path} owned by {SLURM_USER} ({SLURM_ID}:{SLURM_ID}): an NFS export that "
               f"squashes root refuses it; on the server, chown {SLURM_ID}:{SLURM_ID} the exported directory (or "
               "export it with no_root_squash to the controllers: allow_root_equivalent: true on that export in cluster.yaml)")
    return "\n".join([
        f"mountpoint -q {q(mount)} || {{ echo {q(absent_mount)} >&2; exit 1; }}",
        f"timeout -k 2 30 install -d -m {STATE_MODE} -o {SLURM_USER} -g {SLURM_USER} {q(path)} || {{",
        f"  echo {q(refused)} >&2",
        "  exit 1; }"])


@operation()
def shared_state_dir(path: str, mount: str):
    """slurmctld's StateSaveLocation on a spec mount: a directory owned by slurm, 0755, made only while
    `mount` is mounted (the MountPoint and OwnedDir facts: bounded, never the node snapshot)."""
    state = host.get_fact(OwnedDir, path=path) if path_state(mount).mounted else None
    if state is None:  # this run's `storage mounts` op mounts it first (a fresh node): the script makes the
        # directory only once `mountpoint` says so, and fails naming the mount otherwise
        annotate(disruption="none", diff=f"{path}: made once {mount} is mounted (this run's storage mounts)\n")
        yield sh(make_state_script(path, mount))
        return
    if state.kind == "hung":
        raise CorralError(f"{path} did not answer on {host.name} within {STAT_TIMEOUT_S} s", value=path,
                          fix=f"check the server of {mount} (`findmnt {mount}` on the node)")
    if state.kind == "other":
        raise CorralError(f"{path} exists on {host.name} and is not a directory", value=state.detail,
                          fix=f"move {path} away, or set slurm.state_save_location to a directory")
    if (state.kind, state.mode, state.user, state.group) == ("dir", STATE_MODE, SLURM_USER, SLURM_USER):
        host.noop(f"directory {path} in place ({SLURM_USER}, on {mount})")
        return
    annotate(disruption="none")
    yield sh(make_state_script(path, mount))


def _local_want(path: str) -> Want:
    """The local state directory in every node's one snapshot (registered for the run)."""
    return register_for_run(Want(paths=(path,)))


def state_directory(cluster, want: Want) -> None:
    """slurm controller's ops for the StateSaveLocation (`want`: the deploy's, holding STATE_DROPIN)."""
    path, mount = state_save_location(cluster), state_mount(cluster)
    if mount is None:
        operations.directory(name=path, path=path, user=SLURM_USER, group=SLURM_USER, want=_local_want(path))
        gone = absent(name="slurmctld state drop-in (the state is on the local disk)", paths=[STATE_DROPIN],
                      want=want, what="slurmctld state drop-in")
        operations.run_when_changed(name="systemd reloaded (slurmctld state drop-in removed)",
                                    description="daemon-reload", commands=["systemctl daemon-reload"],
                                    _if=gone.did_change)
        return
    shared_state_dir(name=f"{path} (StateSaveLocation on {mount.path})", path=path, mount=mount.path)
    dropin = operations.managed_file(name="slurmctld needs the mount of its state (RequiresMountsFor)",
                                     path=STATE_DROPIN, content=state_dropin(cluster), want=want)
    operations.run_when_changed(name="systemd reloaded (slurmctld state drop-in)", description="daemon-reload",
                                commands=["systemctl daemon-reload"], _if=dropin.did_change)
