"""Shared storage, rendered (pure): the NFS server's /etc/exports.d/corral.exports, one systemd .mount
unit per shared mount (named as `systemd-escape --path --suffix=mount` names it), the slurmd drop-in
that orders slurmd after the node's mounts (deploy/storage.py) and slurmctld's drop-in that needs the
mount its StateSaveLocation is on (deploy/slurm.py).

The spec types every value already (spec/types.py: paths, mount options, sources); each rendered value
still passes a last guard: no whitespace, quote, `%` (a systemd specifier), `\\`, `$`, `;`, `#` or
parenthesis reaches a file.
"""

from __future__ import annotations

import ipaddress
import re

from corral.errors import CorralError
from corral.spec.cluster import Cluster, Node
from corral.spec.models_storage import Mount
from corral.spec.shared import export_clients, mounts_of, state_mount, state_save_location, what

EXPORTS = "/etc/exports.d/corral.exports"
UNIT_DIR = "/etc/systemd/system"
MOUNTS_DROPIN = "/etc/systemd/system/slurmd.service.d/corral-mounts.conf"
STATE_DROPIN = "/etc/systemd/system/slurmctld.service.d/corral-state.conf"
HEADER = "# Managed by corral"
WIDTH = 80  # an exports line longer than this continues on the next (" \" then four spaces)
TIMEOUT_S = 60  # TimeoutSec= of a mount unit: a server that does not answer fails the mount
# systemd's list of network filesystems (fstype_is_network) and the parallel filesystems of GPU clusters
NETWORK_FS = frozenset({"nfs", "nfs4", "cifs", "smb3", "smbfs", "sshfs", "fuse.sshfs", "ncpfs", "ncp", "afs",
                        "ceph", "glusterfs", "fuse.glusterfs", "gfs", "gfs2", "ocfs2", "pvfs2", "davfs", "lustre",
                        "beegfs", "wekafs", "gpfs", "9p", "virtiofs"})
_UNSAFE = re.compile(r"[\s\"'`%\\$;#()\x00-\x1f\x7f]")
_UNIT_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789:_.")


def unit_name(path: str, suffix: str = "mount") -> str:
    """The unit name systemd gives a path: `systemd-escape --path --suffix=mount PATH`
    ("/home" -> "home.mount", "/data/ml-x" -> "data-ml\\x2dx.mount", "/" -> "-.mount")."""
    if not path.startswith("/"):
        raise CorralError("a mount point must be an absolute path", value=path, fix="write it as /PATH")
    parts = [p for p in path.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise CorralError("a mount point must be a normalised path (no ..)", value=path, fix="write the path itself")
    if not parts:
        return f"-.{suffix}"
    out = []
    for i, byte in enumerate("/".join(parts).encode()):
        char = chr(byte)
        if char == "/":
            out.append("-")
        elif char in _UNIT_CHARS and not (i == 0 and char == "."):
            out.append(char)
        else:
            out.append(f"\\x{byte:02x}")
    return "".join(out) + f".{suffix}"


def _guard(value: object, what_: str) -> str:
    """The value as it is written, or a CorralError when it could change the file's structure."""
    text = str(value)
    if not text or _UNSAFE.search(text):
        raise CorralError(f"refusing to render {what_}: an empty value, or one with whitespace, a quote, %, \\, $, "
                          "; # or a parenthesis", value=text, fix="correct the value in storage: of cluster.yaml")
    return text


def _options(options: list[str], what_: str) -> str:
    for o in options:
        if "," in _guard(o, what_):
            raise CorralError(f"refusing to render {what_}: an option holds a comma", value=o,
                              fix="give each option as its own list item")
    return ",".join(options)


def _client_key(client: str) -> tuple:
    try:
        net = ipaddress.ip_network(client, strict=False)
    except ValueError:
        return (9, 0, 0, client)
    return (net.version, int(net.network_address), net.prefixlen, client)


def _wrap(words: list[str]) -> str:
    line, out = words[0], []
    for word in words[1:]:
        if len(line) + 1 + len(word) + 2 > WIDTH:
            out.append(line + " \\")
            line = "    " + word
        else:
            line += " " + word
    return "\n".join([*out, line])


def render_exports(cluster: Cluster) -> str:
    """/etc/exports.d/corral.exports: `PATH CLIENT(options) ...` per spec export, by path; clients (the
    addresses of the nodes that mount it, or its network) by address. An export no client may mount is
    left out (exports(5) reads a line without clients as "everyone")."""
    lines = [HEADER]
    for export in sorted(cluster.spec.storage.exports, key=lambda e: e.path):
        path = _guard(export.path, "an export path")
        options = _options(list(export.options), f"the options of export {path}")
        clients = sorted({_guard(c, f"a client of export {path}") for c in export_clients(cluster, export)},
                         key=_client_key)
        if not clients:
            lines.append(f"# {path}: no node of the spec mounts it: not exported")
            continue
        lines.append(_wrap([path, *(f"{c}({options})" for c in clients)]))
    return "\n".join(lines) + "\n"


def is_network(mount: Mount) -> bool:
    return mount.fstype in NETWORK_FS or "_netdev" in mount.mount_options()


def render_mount_unit(cluster: Cluster, mount: Mount) -> str:
    """The .mount unit of `mount` (its file name: unit_name(mount.path)); a network filesystem waits for
    the network and is wanted by remote-fs.target, another by local-fs.target."""
    where = _guard(mount.path, "a mount point (Where=)")
    source = _guard(what(cluster, mount), f"the source (What=) of {where}")
    fstype = _guard(mount.fstype, f"the type (Type=) of {where}")
    options = _options(mount.mount_options(), f"the options (Options=) of {where}")
    network = is_network(mount)
    unit = [HEADER, "[Unit]", f"Description=corral: {where} from {source}"]
    if network:
        unit += ["After=network-online.target", "Wants=network-online.target"]
    unit += ["", "[Mount]", f"What={source}", f"Where={where}", f"Type={fstype}"]
    unit += [f"Options={options}"] if options else []
    unit += [f"TimeoutSec={TIMEOUT_S}", "", "[Install]",
             f"WantedBy={'remote-fs.target' if network else 'local-fs.target'}"]
    return "\n".join(unit) + "\n"


def requires_mounts_dropin(cluster: Cluster, node: Node) -> str | None:
    """slurmd's drop-in: started only after the node's shared filesystems' mount units (Wants= + After=;
    a running slurmd is not restarted for it). Not RequiresMountsFor=: its Requires= restarts slurmd
    whenever a mount unit is restarted (systemd.unit(5): "explicitly stopped (or restarted)"), which is
    how corral remounts a changed mount, and a mount failing at boot would keep slurmd down (the node
    "not responding", then DOWN) instead of letting it start and corral-health drain the node with the
    mount's name (slurmd runs the health check before it registers). None: the node mounts nothing."""
    units = " ".join(unit_name(_guard(m.path, "a mount point")) for m in mounts_of(cluster, node))
    if not units:
        return None
    return ("[Unit]\n# after the shared mounts; a lost mount drains the node (corral-health)\n"
            f"Wants={units}\nAfter={units}\n")


def state_dropin(cluster: Cluster) -> str | None:
    """slurmctld's drop-in when its StateSaveLocation is on a spec mount: `RequiresMountsFor=` the state
    directory, so slurmctld starts only with that filesystem mounted (a start on the empty local
    directory underneath would begin with an empty queue and lose every job) and stops when it is
    unmounted (the backup controller, which still has it, takes over). Its Requires= also restarts
    slurmctld when corral remounts a changed mount: slurmctld reads its state back. None: the state is
    on the controller's local disk."""
    if state_mount(cluster) is None:
        return None
    path = _guard(state_save_location(cluster), "slurm.state_save_location (RequiresMountsFor=)")
    return (f"{HEADER}\n[Unit]\n# slurmctld's StateSaveLocation is on shared storage: never start without it\n"
            f"RequiresMountsFor={path}\n")
