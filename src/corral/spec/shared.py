"""Who serves and who mounts the spec's shared storage, where homes are made and where slurmctld keeps
its state (pure; used by the deploys, the renderers, backup/restore, corral-health's config, validate
and `corral virtual`)."""

from __future__ import annotations

import posixpath
from typing import TYPE_CHECKING

from corral.spec.hosts import RangeError, expand_names
from corral.spec.models_storage import Mount, NfsExport

if TYPE_CHECKING:
    from corral.spec.cluster import Cluster, Node


def nfs_server(cluster: Cluster) -> Node | None:
    servers = cluster.with_role("nfs")
    return servers[0] if servers else None


def mount_nodes(cluster: Cluster, mount: Mount) -> list[Node]:
    """The nodes that mount `mount`: its hostlist, or every node with one of its roles."""
    if mount.nodes is not None:
        try:
            names = set(expand_names(mount.nodes))
        except RangeError:
            return []
        return [n for n in cluster.nodes if n.name in names]
    return [n for n in cluster.nodes if set(n.roles) & set(mount.roles)]


def mounts_of(cluster: Cluster, node: Node) -> list[Mount]:
    return [m for m in cluster.spec.storage.mounts if node in mount_nodes(cluster, m)]


def under(path: str, base: str) -> bool:
    return path == base or path.startswith(base.rstrip("/") + "/")


def export_of(cluster: Cluster, mount: Mount) -> NfsExport | None:
    """The spec export an NFS mount from the cluster's own server reads (the closest enclosing one)."""
    if not mount.is_nfs() or mount.server is not None or mount.export is None:
        return None
    found = [e for e in cluster.spec.storage.exports if under(mount.export, e.path)]
    return max(found, key=lambda e: len(e.path)) if found else None


def what(cluster: Cluster, mount: Mount) -> str:
    """What= of the mount unit: server:/export for NFS, the source otherwise."""
    if not mount.is_nfs():
        return mount.source or ""
    server = mount.server if mount.server is not None else getattr(nfs_server(cluster), "address", "")
    host = f"[{server}]" if ":" in str(server) else str(server)
    return f"{host}:{mount.export}"


def export_clients(cluster: Cluster, export: NfsExport) -> list[str]:
    """Client addresses of an export: its network, or the addresses of the nodes mounting it."""
    if export.clients != "cluster":
        return [str(export.clients)]
    addresses: dict[str, None] = {}
    for m in cluster.spec.storage.mounts:
        if export_of(cluster, m) is export:
            addresses.update((n.address, None) for n in mount_nodes(cluster, m))
    return list(addresses)


def home_mount(cluster: Cluster) -> Mount | None:
    """The spec mount holding identity.homes (the deepest enclosing mount point), if any."""
    return enclosing_mount(cluster, cluster.spec.identity.homes)


def home_maker(cluster: Cluster) -> tuple[Node, str] | None:
    """(node, directory on that node) where homes are created once: the NFS server's exported directory
    when homes are on the cluster's own NFS, else the first node mounting them; None: homes are local."""
    return maker(cluster, cluster.spec.identity.homes)


def maker(cluster: Cluster, path: str) -> tuple[Node, str] | None:
    """(node, directory on that node) where `path` on shared storage is written once: on the cluster's own
    NFS server, its exported directory (root on a client is squashed); else the first node mounting it;
    None: `path` is on no spec mount."""
    mount = enclosing_mount(cluster, path)
    if mount is None:
        return None
    export = export_of(cluster, mount)
    server = nfs_server(cluster)
    if export is not None and server is not None and mount.export is not None:
        rest = posixpath.relpath(path, mount.path)
        return server, posixpath.normpath(posixpath.join(mount.export, rest))
    nodes = mount_nodes(cluster, mount)
    return (nodes[0], path) if nodes else None


def enclosing_mount(cluster: Cluster, path: str) -> Mount | None:
    """The spec mount holding `path` (the deepest enclosing mount point), if any."""
    found = [m for m in cluster.spec.storage.mounts if under(path, m.path)]
    return max(found, key=lambda m: len(m.path)) if found else None


def state_save_location(cluster: Cluster) -> str:
    """slurmctld's StateSaveLocation, the one place render/slurm.py, deploy/slurm.py and corral
    backup/restore read it from: `slurm.state_save_location` (default /var/lib/slurm/slurmctld)."""
    return cluster.spec.slurm.state_save_location


def state_mount(cluster: Cluster) -> Mount | None:
    """The spec mount the StateSaveLocation is on (None: the controller's local disk)."""
    return enclosing_mount(cluster, state_save_location(cluster))
