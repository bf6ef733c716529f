"""EMULATION: the NAS behind the spec's shared mounts. This kernel has no NFS (client or server), so
every spec mount is a per-cluster host directory, <workdir>/nas/<share>, bind-mounted into each node
that mounts it (systemd-nspawn --bind), and each export of the `nfs` node is that same directory
bind-mounted at the export path. Everything above the mount (homes, permissions, uids, jobs) is real;
the mount units and the NFS server are proven by operation tests instead (deploy/storage.py skips
them here, saying why).

A share is named by what it serves: the export for mounts from the cluster's own NFS node, the
server and export for a NAS, the type and source otherwise; mounts of the same share see one directory.
"""

from __future__ import annotations

import hashlib
import posixpath
import re
from pathlib import Path
from typing import TYPE_CHECKING

from corral.spec.shared import export_of, mounts_of

if TYPE_CHECKING:
    from corral.spec.cluster import Cluster, Node
    from corral.spec.models_storage import Mount


def _slug(*parts: str) -> str:
    text = "_".join(p.strip("/") for p in parts)
    readable = re.sub(r"[^A-Za-z0-9.-]+", "_", text).strip("_")[:48] or "root"
    return f"{readable}-{hashlib.sha256(text.encode()).hexdigest()[:8]}"


def share_of(cluster: Cluster, mount: Mount) -> tuple[str, str]:
    """(share directory name, sub-path inside it) that the mount shows."""
    export = export_of(cluster, mount)
    if export is not None and mount.export is not None:
        return _slug("export", export.path), posixpath.relpath(mount.export, export.path)
    if mount.is_nfs():
        return _slug(str(mount.server), mount.export or ""), "."
    return _slug(mount.fstype, mount.source or ""), "."


def binds(cluster: Cluster, node: Node, nas: Path) -> list[tuple[Path, str]]:
    """(host directory, path in the node) for every share this node sees, mount points and exports."""
    out: list[tuple[Path, str]] = []
    if "nfs" in node.roles:
        for e in cluster.spec.storage.exports:
            out.append((nas / _slug("export", e.path), e.path))
    for m in mounts_of(cluster, node):
        share, sub = share_of(cluster, m)
        host = nas / share if sub == "." else nas / share / sub
        if not any(path == m.path for _, path in out):
            out.append((host, m.path))
    return out


def prepare(cluster: Cluster, node: Node, nas: Path) -> list[str]:
    """Create the host directories (root 0755 when new) and return the node's --bind= arguments."""
    args = []
    for host, path in binds(cluster, node, nas):
        if not host.exists():
            host.mkdir(mode=0o755, parents=True)
        args.append(f"--bind={_escape(str(host))}:{_escape(path)}")
    return args


def _escape(path: str) -> str:
    """systemd-nspawn splits --bind= at ':'; a colon inside a path is written '\\:'."""
    return path.replace("\\", "\\\\").replace(":", "\\:")

