"""Cross-field checks of `storage:` (pure, before any SSH): an NFS mount has a server and an export of
it, no two mounts share a mount point, no mount covers a system directory, the nfs node exports
something, and contradictory export or mount options are refused. An export that makes a client's
user root on it (models_storage.root_equivalent: no_root_squash, anonuid/anongid 0, insecure; or
clients of every address) is refused unless it says allow_root_equivalent: true, and then warned about
on every run; so is a mount that honours setuid binaries or device files (suid, dev)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import TYPE_CHECKING

from corral.errors import Problem
from corral.spec.hosts import RangeError, expand_names
from corral.spec.models_storage import HARDENING, root_equivalent, world
from corral.spec.shared import export_clients, export_of, mount_nodes, under

if TYPE_CHECKING:
    from corral.spec.cluster import Cluster

Where = Callable[..., str]
SYSTEM = ("/etc", "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/proc", "/sys", "/dev", "/run", "/boot",
          "/var/lib/slurm", "/var/lib/mysql", "/var/spool", "/var/log", "/var/lib/dpkg", "/var/lib/apt", "/root")
EXACT = ("/", "/var", "/var/lib", "/srv", "/opt", "/tmp", "/mnt")


def _system(path: str) -> bool:
    return path in EXACT or any(under(path, s) for s in SYSTEM)


def check_exports(cluster: Cluster, where: Where) -> list[Problem]:
    storage, problems = cluster.spec.storage, []
    servers = cluster.with_role("nfs")
    if storage.exports and not servers:
        problems.append(Problem(where(("storage", "exports")), "exports need a node with the nfs role", None,
                                "add 'nfs' to the roles of the node that serves them"))
    if servers and not storage.exports:
        problems.append(Problem(where(("nodes", servers[0].group, "roles")),
                                "the nfs node exports nothing", servers[0].name,
                                "add storage.exports (e.g. {path: /srv/home}) or remove the nfs role"))
    if len(servers) > 1:
        problems.append(Problem(where(("nodes", servers[1].group, "roles")), "more than one node with the nfs role",
                                servers[1].name, "give the nfs role to one node (mount other servers with "
                                                 "storage.mounts[].server)"))
    for i, e in enumerate(storage.exports):
        at = ("storage", "exports", i)
        opts = {o.split("=")[0] for o in e.options}
        for a, b in (("rw", "ro"), ("root_squash", "no_root_squash"), ("sync", "async"),
                     ("subtree_check", "no_subtree_check"), ("all_squash", "no_all_squash")):
            if a in opts and b in opts:
                problems.append(Problem(where(at + ("options",)), f"both {a} and {b}", e.options,
                                        f"keep one of {a} and {b}"))
        problems += _root_equivalent(e, at, where)
        if e.clients == "cluster" and not export_clients(cluster, e):
            problems.append(Problem(where(at + ("clients",)), "no node of the spec mounts this export", e.path,
                                    "add a storage.mounts entry with export: " + e.path + ", or give clients: a network"))
        if _system(e.path):
            problems.append(Problem(where(at + ("path",)), "a system directory cannot be exported", e.path,
                                    "export a directory of its own, e.g. /srv/nfs/home"))
        for j, other in enumerate(storage.exports[:i]):
            if under(e.path, other.path) or under(other.path, e.path):
                problems.append(Problem(where(at + ("path",)), f"overlaps export {j} ({other.path})", e.path,
                                        "export directories that do not contain each other"))
    return problems


def _root_equivalent(e, at: tuple, where: Where) -> list[Problem]:
    risky = [(("options", e.options.index(o)), o) for o in root_equivalent(e.options)]
    risky += [(("clients",), str(e.clients))] if world(e.clients) else []
    if e.allow_root_equivalent:
        return [] if risky else [Problem(where(at + ("allow_root_equivalent",)), "nothing on this export is root-"
                                         "equivalent: the flag allows nothing", e.path,
                                         "remove allow_root_equivalent")]
    return [Problem(where(at + key), f"{value}: a client's user would be root on this export", value,
                    "remove it (root_squash, a secure port, clients: cluster or your network), or say "
                    "allow_root_equivalent: true on this export if that is meant") for key, value in risky]


def _mount_options(m, at: tuple, where: Where) -> list[Problem]:
    given = set(m.options or ())
    return [Problem(where(at + ("options",)), f"both {on} and {off}", m.options, f"keep one of {on} and {off}")
            for on, off in HARDENING if on in given and off in given]


def check_mounts(cluster: Cluster, where: Where) -> list[Problem]:
    storage, problems = cluster.spec.storage, []
    server = cluster.with_role("nfs")
    for path, count in Counter(m.path for m in storage.mounts).items():
        if count > 1:
            i = max(i for i, m in enumerate(storage.mounts) if m.path == path)
            problems.append(Problem(where(("storage", "mounts", i, "path")), f"mount point used {count} times",
                                    path, "give every mount its own path"))
    for i, m in enumerate(storage.mounts):
        at = ("storage", "mounts", i)
        problems += _mount_options(m, at, where)
        if _system(m.path):
            problems.append(Problem(where(at + ("path",)), "a shared filesystem cannot be mounted over a system "
                                    "directory", m.path, "mount it at its own path, e.g. /home, /data or /scratch"))
        if m.nodes is not None:
            try:
                names = expand_names(m.nodes)
            except RangeError as exc:
                problems.append(Problem(where(at + ("nodes",)), str(exc), m.nodes, "write a hostlist like gpu[01-04]"))
                continue
            unknown = sorted(set(names) - {n.name for n in cluster.nodes})
            if unknown:
                problems.append(Problem(where(at + ("nodes",)), f"not nodes of the spec: {', '.join(unknown[:5])}",
                                        m.nodes, "name nodes of the spec"))
        if m.is_nfs():
            if m.export is None:
                problems.append(Problem(where(at), "an NFS mount needs `export` (the directory on the server)",
                                        m.path, "add export: /srv/nfs/home (or fstype for another filesystem)"))
            if m.source is not None:
                problems.append(Problem(where(at + ("source",)), "NFS mounts take server and export, not source",
                                        m.source, "write server: HOST and export: /PATH"))
            if m.server is None and not server:
                problems.append(Problem(where(at), "no server: the spec has no node with the nfs role", m.path,
                                        "set server: (a NAS) or give a node the nfs role"))
            elif m.server is None and m.export is not None and export_of(cluster, m) is None:
                problems.append(Problem(where(at + ("export",)), "not a directory the nfs node exports", m.export,
                                        "export it in storage.exports, or set server: for another NFS server"))
        else:
            if m.source is None:
                problems.append(Problem(where(at), f"a {m.fstype} mount needs `source` (What= of the unit)", m.path,
                                        "add source:, e.g. 10.0.0.5@tcp:/lustre"))
            for key in ("server", "export"):
                if getattr(m, key) is not None:
                    problems.append(Problem(where(at + (key,)), f"`{key}` is for NFS mounts", getattr(m, key),
                                            "use source: for this filesystem"))
        if not mount_nodes(cluster, m) and m.nodes is None:
            problems.append(Problem(where(at + ("roles",)), "no node of the spec has any of these roles", m.roles,
                                    "list roles the spec's nodes have, or set nodes:"))
    return problems


def storage_warnings(cluster: Cluster) -> list[str]:
    """Said on every spec check, plan and apply: exports that make a client's user root on them (allowed
    by allow_root_equivalent), mounts that honour setuid binaries or device files."""
    out = []
    for e in cluster.spec.storage.exports:
        risky = root_equivalent(e.options) + ([f"clients {e.clients}"] if world(e.clients) else [])
        if risky:
            out.append(f"storage.exports {e.path}: {', '.join(risky)}: a client's user (root, or anyone with "
                       "an unprivileged port or on any network) is root on this export")
    for m in cluster.spec.storage.mounts:
        honoured = [off for _, off in HARDENING if off in (m.options or ())]
        if honoured:
            out.append(f"storage.mounts {m.path}: {', '.join(honoured)}: setuid binaries or device files on "
                       "this filesystem are honoured on the nodes that mount it")
    return out


def check_storage(cluster: Cluster, where: Where) -> list[Problem]:
    return check_exports(cluster, where) + check_mounts(cluster, where)
