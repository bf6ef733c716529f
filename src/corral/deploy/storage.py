"""Shared storage: the NFS server on the node with the `nfs` role (storage server) and the shared
filesystems every node mounts as systemd .mount units (storage mounts).

storage server: nfs-kernel-server, each export directory (made root 0755 when missing; an existing one
keeps its owner and mode), /etc/exports.d/corral.exports, and on a change `exportfs -ra` (no restart:
clients keep their mounts); ready when `exportfs -s` lists every export.
storage mounts: client packages, the mount point, the unit, then one op per mount that (re)starts the
unit in a bounded script and removes a new unit again when it does not mount; compute nodes get a
slurmd drop-in ordering slurmd after the mounts (Wants= + After=: no slurmd restart; see render/storage.py).
Virtual cluster: the kernel has no NFS server and `corral virtual` bind-mounts the emulated NAS: each
path is checked to be there, nothing installed; the slurmd drop-in is written all the same.

Mount points and export directories are read by the MountPoint fact (facts/storage.py), not the node
snapshot: the snapshot stat's its paths, and a stat of a hung NFS mount would hang every deploy's run.
"""

from __future__ import annotations

import hashlib

from pyinfra import host
from pyinfra.api import deploy, operation

from corral.components import gates
from corral.components.slurm import NFS_SERVER
from corral.deploy import operations
from corral.deploy.nodestate import Want, register, register_for_run, snapshot
from corral.engine import run_context
from corral.engine.notes import annotate
from corral.engine.shell import cmd, q, sh
from corral.errors import CorralError
from corral.facts.storage import STAT_TIMEOUT_S, CorralMountUnits, MountPoint, PathState
from corral.render.storage import (EXPORTS, MOUNTS_DROPIN, UNIT_DIR, render_exports, render_mount_unit,
                                   requires_mounts_dropin, unit_name)
from corral.spec.shared import mounts_of

SERVER_PACKAGE, SERVER_UNIT = NFS_SERVER, "nfs-server"
SERVER_WANT = register(Want(paths=(EXPORTS,), services=(SERVER_UNIT,), packages=(SERVER_PACKAGE,)))
DROPIN_WANT = register(Want(paths=(MOUNTS_DROPIN,)))
EXPORT_LOGS = f"exportfs -v; cat {EXPORTS}; journalctl -u {SERVER_UNIT} -n 10 --no-pager"
REEXPORT = "reload NFS exports (exportfs -ra)"
SCRIPT_TIMEOUT_S, START_TIMEOUT_S = 90, 60


def _want(paths: tuple[str, ...] = (), packages: tuple[str, ...] = ()) -> Want:
    """A Want of paths and packages known only from the spec, registered for the run (every node's one
    snapshot reads them), like the static Wants above."""
    return register_for_run(Want(paths=paths, packages=packages))


def path_state(path: str) -> PathState:
    """The MountPoint fact of `path` on this node, read once per run (as the snapshot is)."""
    cache = run_context.current().mount_points
    if (host.name, path) not in cache:
        cache[(host.name, path)] = host.get_fact(MountPoint, path=path)
    return cache[(host.name, path)]


@operation()
def directory_present(path: str):
    """A directory at `path`, made root 0755 when missing. One that exists, or a filesystem mounted
    there, is left as it is: an export's or a mount's owner and mode are never changed."""
    state = path_state(path)
    if state.mounted:
        host.noop(f"{path}: {state.fstype} from {state.source} mounted there")
        return
    if state.kind == "dir":
        host.noop(f"directory {path} in place (owner and mode left as they are)")
        return
    if state.kind == "hung":
        raise CorralError(f"{path} did not answer on {host.name} within {STAT_TIMEOUT_S} s", value=path,
                          fix="a network filesystem above it may hang: check `findmnt` on the node")
    if state.kind == "other":
        raise CorralError(f"{path} exists on {host.name} and is not a directory", value=state.detail,
                          fix=f"move {path} away, or use the directory it points to in the spec")
    annotate(disruption="none")
    yield cmd("install", "-d", "-m", "755", "-o", "root", "-g", "root", path)


def exported_command(paths: list[str]) -> str:
    """Shell test: `exportfs -s` lists every path (its first column)."""
    return " && ".join(f"exportfs -s | awk '{{print $1}}' | grep -qxF -- {q(p)}" for p in paths)


@operation()
def reexport(paths: list[str]):
    """The NFS server re-reads its exports (`exportfs -ra`; clients keep their mounts), then waits until
    `exportfs -s` lists every export path. Used with `_if=` the exports file changed."""
    annotate(disruption=REEXPORT)
    yield cmd("exportfs", "-ra")
    yield operations.readiness("NFS exports", exported_command(paths), EXPORT_LOGS)


@operation()
def virtual_nas(paths: list[str], reason: str, must_mount: bool):
    """Virtual cluster: nothing to install (`corral virtual` bind-mounts the host's directory, the
    emulated NAS); each path must be there (`must_mount`: a mount point; else a directory or a mount)."""
    for path in paths:
        state = path_state(path)
        if must_mount and not state.mounted:
            raise CorralError(f"virtual cluster: {path} is not mounted on {host.name}", value=state.kind,
                              fix="run `corral virtual up` again (it restarts nodes whose mounts changed)")
        if not must_mount and not (state.mounted or state.kind == "dir"):
            raise CorralError(f"virtual cluster: the export directory {path} is not on {host.name}",
                              value=state.kind, fix="run `corral virtual up` again")
    host.noop(f"skipped: {reason}")
    return
    yield  # a generator, as pyinfra operations are


def mount_script(path: str, unit: str, action: str, new: bool, was_mounted: bool = False,
                 unit_dir: str = UNIT_DIR) -> str:
    """daemon-reload, enable, `systemctl <action>` (bounded), then `mountpoint`; on failure the unit's
    status and log, and a new unit removed again (disabled, stopped unless something was mounted there
    before, deleted) so nothing half-made stays."""
    lines: list[str] = []
    lines.extend(["rc=0",
                  f"{{ systemctl daemon-reload && systemctl enable --quiet {q(unit)} && "
                  f"timeout {int(START_TIMEOUT_S)} systemctl {q(action)} {q(unit)}; }} || rc=$?",
                  f"[ \"$rc\" -eq 0 ] && timeout -k 2 10 mountpoint -q {q(path)} && exit 0",
                  f"echo {q(f'corral: {path} is not mounted ({unit}, systemctl {action}); its status and log:')} >&2",
                  f"systemctl status {q(unit)} --no-pager -l 2>&1 | tail -n 15 >&2",
                  f"journalctl -u {q(unit)} -n 10 --no-pager >&2"])
    if new:
        lines.extend([f"echo {q(f'corral: removing the new unit {unit} again')} >&2",
                      f"systemctl disable --quiet {q(unit)}"])
        if not was_mounted:  # a mount that was there before (/etc/fstab) stays
            lines.append(f"timeout -k 2 10 systemctl stop {q(unit)}")
        lines.extend([f"rm -f {q(f'{unit_dir}/{unit}')}",
                      f"systemctl daemon-reload; systemctl reset-failed {q(unit)} 2>/dev/null"])
    lines.append("exit 1")
    return "\n".join(lines)


@operation()
def mounted(path: str, unit: str, content: str, want: Want):
    """`path` mounted by its unit (`content`, written by the op before): a new unit is enabled and started
    (and removed again if it does not mount), a changed one restarted (a remount), a stopped one started."""
    cur = snapshot(want).files.get(f"{UNIT_DIR}/{unit}")
    new = cur is None
    changed = not new and cur.get("sha256") != hashlib.sha256(content.encode()).hexdigest()
    state = path_state(path)
    if not new and not changed and state.mounted:
        host.noop(f"{path} mounted ({state.fstype} from {state.source})")
        return
    if changed and state.mounted:
        annotate(disruption=f"remount {path} (processes using it see it briefly unmounted)")
    elif state.mounted:
        annotate(disruption=f"none ({path} is mounted already, {state.fstype} from {state.source}: {unit} takes "
                            "it over as it is)")
    else:
        annotate(disruption=f"mount {path}")
    # what is mounted there changes now: later ops of this run read it again (path_state's cache)
    run_context.current().mount_points.pop((host.name, path), None)
    yield cmd("timeout", str(SCRIPT_TIMEOUT_S), sh(mount_script(path, unit, "restart" if changed else "start", new,
                                                                state.mounted)))


def unmount_script(unit: str, where: str, unit_dir: str = UNIT_DIR) -> str:
    """A unit corral made for a mount the spec dropped: unmounted (bounded) and removed; a busy mount is
    the node's failure, the unit left in place (nothing half-removed), with what holds it."""
    return "\n".join([
        f"if ! timeout -k 2 60 systemctl disable --now --quiet {q(unit)}; then",
        f"  echo {q(f'corral: cannot unmount {where} ({unit}); what uses it:')} >&2",
        f"  timeout -k 2 10 fuser -vm {q(where)} 2>&1 | tail -n 15 >&2",
        f"  systemctl status {q(unit)} --no-pager -l 2>&1 | tail -n 5 >&2",
        "  exit 1",
        "fi",
        f"rm -f {q(f'{unit_dir}/{unit}')}",
        f"systemctl daemon-reload; systemctl reset-failed {q(unit)} 2>/dev/null; true"])


@operation()
def stale_mounts(keep: list[str]):
    """Mount units corral wrote that the spec no longer names (`keep`: this node's unit names): each is
    unmounted and removed; its mount point directory and data stay."""
    units = host.get_fact(CorralMountUnits) or {}
    stale = {u: w for u, w in sorted(units.items()) if u not in keep}
    if not stale:
        host.noop("no mount left over from an earlier spec")
        return
    annotate(disruption="unmount " + ", ".join(w or u for u, w in stale.items()) + " (removed from the spec)",
             diff="".join(f"- {UNIT_DIR}/{u} ({w})\n" for u, w in stale.items()))
    for unit, where in stale.items():
        yield cmd("timeout", str(SCRIPT_TIMEOUT_S), sh(unmount_script(unit, where)))


@deploy("storage server")
def storage_server() -> None:
    node, cluster = host.data.corral_node, host.data.corral_cluster
    exports = cluster.spec.storage.exports
    if not gates.nfs_server(cluster, node):  # the declaration's gate (components/slurm.py)
        return
    paths = [e.path for e in exports]
    if cluster.spec.virtual is not None:
        virtual_nas(name="NFS server", paths=paths, must_mount=False,
                    reason="virtual cluster: this kernel has no NFS server; corral virtual bind-mounts a host "
                           f"directory (the emulated NAS) at {', '.join(paths)}")
        return
    operations.packages(name="NFS server installed", names=[SERVER_PACKAGE], want=SERVER_WANT)
    for path in paths:
        directory_present(name=f"export directory {path}", path=path)
    changed = operations.managed_file(name=EXPORTS, path=EXPORTS, content=render_exports(cluster),
                                      disruption=REEXPORT, want=SERVER_WANT)
    operations.service(name="nfs-server running", unit=SERVER_UNIT, want=SERVER_WANT,
                       wait=exported_command(paths), logs=EXPORT_LOGS)
    reexport(name="exports re-read (exportfs -ra)", paths=paths, _if=changed.did_change)


@deploy("storage mounts")
def storage_mounts() -> None:
    node, cluster = host.data.corral_node, host.data.corral_cluster
    mounts = mounts_of(cluster, node)
    if cluster.spec.virtual is not None:
        for m in mounts:
            virtual_nas(name=f"{m.path} (emulated NAS)", paths=[m.path], must_mount=True,
                        reason=f"virtual cluster: {m.path} is the emulated NAS, a bind mount of the host's "
                               "directory (corral virtual)")
    else:
        packages = tuple(dict.fromkeys(p for m in mounts for p in m.client_packages()))
        if packages:
            operations.packages(name=f"storage clients installed: {', '.join(packages)}", names=list(packages),
                                want=_want(packages=packages))
        for m in mounts:
            unit, text = unit_name(m.path), render_mount_unit(cluster, m)
            want = _want(paths=(f"{UNIT_DIR}/{unit}",))
            directory_present(name=f"mount point {m.path}", path=m.path)
            operations.managed_file(name=f"{UNIT_DIR}/{unit}", path=f"{UNIT_DIR}/{unit}", content=text, want=want)
            mounted(name=f"{m.path} mounted", path=m.path, unit=unit, content=text, want=want)
        stale_mounts(name="mounts removed from the spec unmounted", keep=[unit_name(m.path) for m in mounts])
    if "compute" not in node.roles:
        return
    text = requires_mounts_dropin(cluster, node)
    if text is None:  # the node mounts nothing (any more): no ordering drop-in
        from corral.deploy.users import absent
        gone = absent(name="slurmd mounts drop-in (the node mounts nothing)", paths=[MOUNTS_DROPIN],
                      want=DROPIN_WANT, what="slurmd mounts drop-in")
        operations.run_when_changed(name="systemd reloaded (slurmd drop-in removed)", description="daemon-reload",
                                    commands=["systemctl daemon-reload"], _if=gone.did_change)
        return
    dropin = operations.managed_file(name="slurmd starts after the shared mounts", path=MOUNTS_DROPIN,
                                     content=text, want=DROPIN_WANT)
    operations.run_when_changed(name="systemd reloaded (slurmd drop-in)", description="daemon-reload",
                                commands=["systemctl daemon-reload"], _if=dropin.did_change)
