"""The `storage:` section: NFS exports of the cluster's `nfs` node and the shared filesystems nodes
mount (deploy/storage.py renders /etc/exports.d/corral.exports and one systemd .mount unit per mount).
Cross-field checks (a server to mount from, no overlapping paths) are in spec/rules_storage.py.
"""

from __future__ import annotations

import ipaddress
import re
from typing import Literal

from pydantic import Field

from corral.spec.models_base import Strict
from corral.spec.types import AbsPath, ExportOption, Hostname, MountOption, MountSource, PackageName

EXPORT_DEFAULTS = ("rw", "sync", "root_squash", "no_subtree_check")
NFS_MOUNT_DEFAULTS = ("rw", "hard", "noatime", "_netdev")
OTHER_MOUNT_DEFAULTS = ("_netdev",)
# added to every mount unless its options say the opposite: a setuid binary or device node planted on
# shared storage (by a user who is root elsewhere, or on the server) is not honoured on the nodes
HARDENING = (("nosuid", "suid"), ("nodev", "dev"))
# exports(5) options that make a client's user root on the export: root not squashed, the squashed
# (or every, with all_squash) user mapped to uid/gid 0, requests from unprivileged ports (any local
# user of a client can then speak NFS with a forged uid)
ROOT_EQUIVALENT_OPTIONS = ("no_root_squash", "insecure", "anonuid=0", "anongid=0")
_NUMBER = re.compile(r"\s*[+-]?[0-9]+")


def _is_zero_id(value: str) -> bool:
    """exportfs reads anonuid/anongid with strtoul into a 32-bit id: 00, -0 and 4294967296 are all 0."""
    return bool(_NUMBER.fullmatch(value)) and int(value) % 2**32 == 0


def root_equivalent(options: list[str]) -> list[str]:
    """The options of `options` that make a client's user root on the export."""
    out = []
    for option in options:
        key, eq, value = option.partition("=")
        if (not eq and key in ("no_root_squash", "insecure")) or (eq and key in ("anonuid", "anongid")
                                                                   and _is_zero_id(value)):
            out.append(option)
    return out


def world(clients: object) -> bool:
    """A client network of every address (0.0.0.0/0, ::/0) or of public ones: a client there is a machine
    nobody here administers, and its root is root on the export."""
    return isinstance(clients, (ipaddress.IPv4Network, ipaddress.IPv6Network)) and (
        clients.prefixlen == 0 or not clients.is_private)
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
        description="export options (exports(5)); root-equivalent ones (no_root_squash, anonuid=0, anongid=0, "
                    "insecure) only with allow_root_equivalent")
    allow_root_equivalent: bool = Field(
        default=False, description="allow options or clients that make a client's user root on this export "
                                   "(no_root_squash, anonuid=0/anongid=0, insecure, clients 0.0.0.0/0, ::/0 or a public network); "
                                   "warned about on every run")


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
                                  "for NFS, _netdev otherwise; nosuid and nodev are added unless the list "
                                  "says suid or dev")
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
        given = list(self.options if self.options is not None
                     else NFS_MOUNT_DEFAULTS if self.is_nfs() else OTHER_MOUNT_DEFAULTS)
        return given + [on for on, off in HARDENING if on not in given and off not in given]

    def client_packages(self) -> list[str]:
        if self.packages is not None:
            return list(self.packages)
        return ["nfs-common"] if self.is_nfs() else []


class StorageSpec(Strict):
    """Shared storage: what the `nfs` node exports and what every node mounts."""

    exports: list[NfsExport] = Field(default_factory=list, description="NFS exports of the node with the nfs role")
    mounts: list[Mount] = Field(default_factory=list, description="shared filesystems and the nodes that mount them")
