"""The `storage:` section: NFS exports of the cluster's `nfs` node and the shared filesystems nodes
mount (deploy/storage.py renders /etc/exports.d/corral.exports and one systemd .mount unit per mount).
Cross-field checks (a server to mount from, no overlapping paths) are in spec/rules_storage.py.
"""

from __future__ import annotations

import ipaddress
from typing import Literal

from pydantic import Field

from corral.spec.models_base import Strict
from corral.spec.types import AbsPath, ExportOption, Hostname, MountOption, MountSource, PackageName

EXPORT_DEFAULTS = ("rw", "sync", "root_squash", "no_subtree_check")
NFS_MOUNT_DEFAULTS = ("rw", "hard", "noatime", "_netdev")
OTHER_MOUNT_DEFAULTS = ("_netdev",)
NFS_TYPES = ("nfs", "nfs4")
ROLES = Literal["controller", "compute", "login", "accounting", "monitoring", "nfs"]


class NfsExport(Strict):
    """A directory the cluster's `nfs` node serves: one line of /etc/exports.d/corral.exports."""

    path: AbsPath = Field(description="the directory exported (created, root 0755, when missing)")
    clients: Literal["cluster"] | ipaddress.IPv4Network | ipaddress.IPv6Network = Field(
        default="cluster", description="who may mount it: `cluster` (the addresses of the spec's nodes that "
                                       "mount it) or a network, e.g. 10.0.0.0/24")
    options: list[ExportOption] = Field(
        default_factory=lambda: list(EXPORT_DEFAULTS),
        description="export options (exports(5)); no_root_squash only when given (warned about on every run)")


class Mount(Strict):
    """A shared filesystem mounted on a set of nodes, as a systemd mount unit."""

    path: AbsPath = Field(description="mount point on the nodes (Where= of the .mount unit)")
    fstype: str = Field(default="nfs", pattern=r"^[a-z0-9][a-z0-9._]{0,31}$",
                        description="filesystem type (Type=): nfs, nfs4, lustre, beegfs, wekafs, ceph, ...")
    server: Hostname | ipaddress.IPv4Address | ipaddress.IPv6Address | None = Field(
        default=None, description="NFS: the server (a NAS); unset: the spec's node with the nfs role")
    export: AbsPath | None = Field(default=None, description="NFS: the exported directory on the server")
    source: MountSource | None = Field(default=None, description="other filesystems: What= of the unit, e.g. "
                                                                 "10.0.0.5@tcp:/lustre (Lustre), mon1:6789:/ (CephFS)")
    options: list[MountOption] | None = Field(
        default=None, description="mount options (Options=), x-systemd.* included; unset: rw,hard,noatime,_netdev "
                                  "for NFS, _netdev otherwise")
    roles: list[ROLES] = Field(default_factory=lambda: ["compute", "login"],
                               description="nodes with any of these roles mount it (unless `nodes` is set)")
    nodes: str | None = Field(default=None, pattern=r"^[A-Za-z0-9._,\[\]-]+$",
                              description="a hostlist of the nodes that mount it, instead of `roles`")
    packages: list[PackageName] | None = Field(
        default=None, description="client packages installed before mounting; unset: nfs-common for NFS, "
                                  "none otherwise (install the vendor's client yourself)")
    readonly_ok: bool = Field(default=False, description="a read-only mount is healthy (else corral-health "
                                                         "fails a node whose mount went read-only)")

    def is_nfs(self) -> bool:
        return self.fstype in NFS_TYPES

    def mount_options(self) -> list[str]:
        if self.options is not None:
            return list(self.options)
        return list(NFS_MOUNT_DEFAULTS if self.is_nfs() else OTHER_MOUNT_DEFAULTS)

    def client_packages(self) -> list[str]:
        if self.packages is not None:
            return list(self.packages)
        return ["nfs-common"] if self.is_nfs() else []


class StorageSpec(Strict):
    """Shared storage: what the `nfs` node exports and what every node mounts."""

    exports: list[NfsExport] = Field(default_factory=list, description="NFS exports of the node with the nfs role")
    mounts: list[Mount] = Field(default_factory=list, description="shared filesystems and the nodes that mount them")
