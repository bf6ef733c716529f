"""DeepOps' NFS (slurm-cluster.yml's nfs_exports and nfs_mounts, served by nfs_server_group and mounted on
nfs_client_group) -> cluster.yaml's `storage:` and the `nfs` role of the server.

Root squash, chosen on purpose: DeepOps exports /home and /sw as `*(rw,sync,no_root_squash)`, so root on
any host that reaches the server is root on every home and on the shared software. The import exports
them with corral's default, `root_squash`, to the nodes that mount them (`clients: cluster`): corral
makes homes on the server itself and never writes to a share as root from a client, so nothing of
corral's needs root there. The one export kept `no_root_squash` (with `allow_root_equivalent: true`, which
corral warns about on every run) is the one holding the Slurm HA state (deepops_ha.py): the controllers'
root creates and chowns slurmctld's state directory through the mount. Each change is reported as
changed on purpose; what cannot be carried is listed with the key to set instead."""

from __future__ import annotations

import ipaddress
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from corral.importers.deepops_inventory import Inventory, Var
from corral.importers.deepops_report import MAPPED, Report
from corral.importers.deepops_vars import truthy
from corral.spec.hosts import compress_names, expand_names
from corral.spec.models_storage import root_equivalent, world
from corral.spec.rules_storage import EXACT, SYSTEM
from corral.spec.shared import under

CLIENT_RE = re.compile(r"([^\s()]+)\(([^)]*)\)")  # exports(5): client(options) ...
SERVER_RE = re.compile(r"^\{\{\s*groups\[\s*['\"]([\w.-]+)['\"]\s*\]\[\s*(\d+)\s*\]\s*\}\}$")
EXPORT_OPTION = re.compile(r"[a-z_]{1,32}(=[A-Za-z0-9_.:@/+-]{1,128})?")
MOUNT_OPTION = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.=:/@+-]{0,127}")
OPPOSITES = (("rw", "ro"), ("root_squash", "no_root_squash"), ("sync", "async"), ("subtree_check", "no_subtree_check"))
ROLE_SETS = (("compute",), ("compute", "login"), ("login",))  # how a mount's clients are named, if they fit


def item_where(var: Var, i: int) -> str:
    """file:line of the i-th entry of a YAML list variable (its own line), else the variable's."""
    lc = getattr(var.value, "lc", None)
    try:
        return f"{var.where.rsplit(':', 1)[0]}:{lc.item(i)[0] + 1}" if lc is not None else var.where
    except (KeyError, IndexError, TypeError):
        return var.where


def _system(path: str) -> bool:  # corral refuses to export or mount over these (rules_storage)
    return path in EXACT or any(under(path, s) for s in SYSTEM)


def abs_path(value: object) -> str | None:
    text = str(value).strip() if value is not None else ""
    ok = re.fullmatch(r"/[A-Za-z0-9._+@:,=/-]*", text) and "/../" not in text + "/"
    return text.rstrip("/") or "/" if ok else None


@dataclass
class StorageImport:
    inv: Inventory
    get: Callable[[str], Var | None]  # a variable as the cluster's hosts see it
    names: dict[str, str]  # inventory host -> corral node name (hosts that are nodes)
    addresses: dict[str, str]  # corral node name -> address
    roles: dict[str, list[str]]  # corral node name -> roles (the nfs role is added here)
    report: Report
    used: set[str] = field(default_factory=set)
    server: str | None = None  # the node with the nfs role
    exports: list[dict] = field(default_factory=list)
    mounts: list[dict] = field(default_factory=list)  # each with "_clients": the node names that mount it
    keep_root: set[str] = field(default_factory=set)  # export paths keeping no_root_squash (the HA state)
    server_group: str = "[slurm-nfs]"  # where the server came from, for the report

    def take(self, name: str) -> Var | None:
        var = self.get(name)
        if var is not None:
            self.used.add(name)
        return var

    def run(self) -> StorageImport:
        on, group = self.take("slurm_enable_nfs_server"), self.take("nfs_server_group")
        exports, mounts = self.take("nfs_exports"), self.take("nfs_mounts")
        hosts = self.inv.resolve(str(group.value)) if group is not None else None
        if group is not None and hosts is None:
            self.report.note(group.where, "nfs_server_group", f"pattern {group.value!r} too complex; used "
                             "'slurm-nfs[0]'")
        hosts = (hosts if hosts is not None else self.inv.resolve("slurm-nfs[0]") or [])[:1]
        self.server_group = "nfs_server_group" if group is not None and hosts else "[slurm-nfs]"
        why = ("not carried: slurm_enable_nfs_server is false (DeepOps served none)" if not truthy(on) else
               "no NFS server host ([slurm-nfs] or nfs_server_group is empty): not carried" if not hosts else
               f"its server {hosts[0]} is not a node of the cluster (in no DeepOps role group): corral does not "
               "manage its exports" if hosts[0] not in self.names else None)
        if why is None:
            self.server = self.names[hosts[0]]
            if exports is not None:
                self.read_exports(exports)
        elif exports is not None:
            self.report.note(exports.where, "nfs_exports", why)
        clients = self.clients(mounts)
        if mounts is not None and clients:
            self.read_mounts(mounts, clients)
        return self

    def finish(self) -> None:
        """After deepops_ha.py: mounts of the nfs node need a carried export; the exports settle (root
        squash, no reader); the nfs node gets its role when it exports something."""
        kept = []
        for m in self.mounts:
            if "server" not in m and not any(under(m["export"], e["path"]) for e in self.exports):
                self.report.note(m["_at"], m["_subject"], f"{m['export']} is not among the carried exports of "
                                 f"{self.server or 'the nfs node'}: set storage.mounts[].server or export it")
                continue
            kept.append(m)
        self.mounts = kept
        self.settle_exports()
        if self.server is not None and self.exports:
            self.roles[self.server].append("nfs")
        elif self.server is not None:
            self.report.note(self.inv.group_where("slurm-nfs"), f"{self.server_group} {self.server}", "imported "
                             "without the nfs role: it exports nothing the import carried (see nfs_exports)")

    def clients(self, mounts: Var | None) -> list[str]:
        """The nodes DeepOps mounted nfs_mounts on: nfs_client_group (default [slurm-nfs-client])."""
        on, group = self.take("slurm_enable_nfs_client_nodes"), self.take("nfs_client_group")
        pattern = str(group.value) if group is not None else "slurm-nfs-client"
        hosts = self.inv.resolve(pattern) if truthy(on) and mounts is not None else []
        why = ("not read: nfs_mounts is unset (DeepOps mounted nothing)" if mounts is None else
               "not read: slurm_enable_nfs_client_nodes is false" if not truthy(on) else
               "not read: nfs_client_group names the NFS clients" if group is not None else None)
        where = next((g.where for n, g in self.inv.groups.items() if n == "slurm-nfs-client"), "")
        if self.inv.has_members("slurm-nfs-client") and why is not None:
            self.report.note(where, "[slurm-nfs-client]", why)
        elif self.inv.has_members("slurm-nfs-client"):
            self.report.add(MAPPED, where, "[slurm-nfs-client]", "its hosts mount nfs_mounts", "storage.mounts[].nodes")
        if mounts is None:
            return []
        if not truthy(on) or hosts == []:
            self.report.note(mounts.where, "nfs_mounts", "not carried: slurm_enable_nfs_client_nodes is false "
                             "(DeepOps mounted none)" if not truthy(on) else f"not carried: {pattern} names no host "
                             "(DeepOps mounted them nowhere)")
            return []
        if hosts is None:
            self.report.note(group.where if group else mounts.where, "nfs_client_group",
                             f"pattern {pattern!r} too complex: storage.mounts not carried; write them with nodes:")
            return []
        left = [h for h in hosts if h not in self.names]
        if left:
            self.report.note(group.where if group else mounts.where, "nfs_client_group", f"{', '.join(left)}: not "
                             "nodes of the cluster (in no DeepOps role group); they mount nothing corral manages")
        return [self.names[h] for h in hosts if h in self.names]

    def read_exports(self, var: Var) -> None:
        entries = var.value if isinstance(var.value, list) else None
        if entries is None:
            return self.report.note(var.where, "nfs_exports", "not a list of {path, options}: write storage.exports")
        for i, entry in enumerate(entries):
            at, subject = item_where(var, i), f"nfs_exports[{i}]"
            path = abs_path(entry.get("path")) if isinstance(entry, dict) else None
            text = str(entry.get("options", "")) if isinstance(entry, dict) else ""
            if path is None or "{{" in text:
                self.report.note(at, subject, f"{entry!r}: no plain absolute path and options (a Jinja template is "
                                 "not evaluated): write it in storage.exports")
            elif _system(path):
                self.report.note(at, subject, f"{path}: corral exports no system directory: export a directory of "
                                 "its own (storage.exports)")
            elif any(under(path, e["path"]) or under(e["path"], path) for e in self.exports):
                self.report.note(at, subject, f"{path} overlaps another export: corral exports directories that do "
                                 "not contain each other")
            else:
                self.export(at, subject, path, text)

    def export(self, at: str, subject: str, path: str, text: str) -> None:
        specs = CLIENT_RE.findall(text)
        if not specs or CLIENT_RE.sub("", text).strip():
            return self.report.note(at, subject, f"options {text!r} are not client(options) entries: write "
                                    "storage.exports by hand")
        client, options = specs[0][0], [o.strip() for o in specs[0][1].split(",") if o.strip()]
        bad = [o for o in options if not EXPORT_OPTION.fullmatch(o)]
        both = [f"{a}+{b}" for a, b in OPPOSITES if a in options and b in options]
        if bad or both:
            return self.report.note(at, subject, f"options {', '.join(bad + both)} cannot be carried: write "
                                    "storage.exports by hand")
        e: dict = {"path": path, "clients": "cluster", "options": options, "_deepops": text, "_at": at,
                   "_subject": subject}
        try:
            net = ipaddress.ip_network(client, strict=False)
            e["clients"] = "cluster" if world(net) else str(net)
        except ValueError:
            net = None
        if net is None or world(net) or len(specs) > 1:
            what = "every host (*)" if client == "*" else f"{len(specs)} client entries" if len(specs) > 1 else client
            self.report.change(at, subject, f"DeepOps exported {path} to {what}; corral exports it to the nodes "
                               "that mount it (clients: cluster)", f"storage.exports[{len(self.exports)}].clients")
        self.exports.append(e)

    def settle_exports(self) -> None:
        """Root squash (after deepops_ha.py chose the export it keeps), and the exports no node mounts."""
        kept = []
        for e in self.exports:
            risky = root_equivalent(e["options"])
            at, subject, i = e["_at"], e["_subject"], len(kept)
            if risky and e["path"] in self.keep_root:
                e["allow_root_equivalent"] = True
                self.report.change(at, subject, f"{', '.join(risky)} kept: {e['path']} holds the Slurm HA state, "
                                   "which the controllers' root creates and chowns through the mount (corral warns "
                                   "about it on every run)", f"storage.exports[{i}].allow_root_equivalent")
            elif risky:
                e["options"] = [o for o in e["options"] if o not in risky]
                e["options"] += [] if "root_squash" in e["options"] else ["root_squash"]
                self.report.change(at, subject, f"{', '.join(risky)} dropped, root_squash instead: root on a client "
                                   "is not root on the share (corral makes homes on the server; "
                                   "docs/migrating-from-deepops.md)", f"storage.exports[{i}].options")
            if e["clients"] == "cluster" and not any(m.get("export") and under(m["export"], e["path"]) and
                                                     m["_clients"] for m in self.mounts if "server" not in m):
                self.report.note(at, subject, f"{e['path']}: no imported mount reads it, and corral exports to the "
                                 "nodes that mount it: add storage.exports with clients: <your network>")
                continue
            kept.append(e)
        self.exports = kept

    def read_mounts(self, var: Var, clients: list[str]) -> None:
        entries = var.value if isinstance(var.value, list) else None
        if entries is None:
            return self.report.note(var.where, "nfs_mounts", "not a list of {mountpoint, server, path, options}: "
                                    "write storage.mounts")
        for i, entry in enumerate(entries):
            at, subject = item_where(var, i), f"nfs_mounts[{i}]"
            get = entry.get if isinstance(entry, dict) else (lambda _k: None)
            point, export = abs_path(get("mountpoint")), abs_path(get("path"))
            options = [o.strip() for o in str(get("options") or "").split(",") if o.strip()]
            if point is None or export is None or any(not MOUNT_OPTION.fullmatch(o) for o in options):
                self.report.note(at, subject, f"{entry!r}: no plain mountpoint, path and options (a Jinja template "
                                 "is not evaluated): write it in storage.mounts")
            elif _system(point) or any(m["path"] == point for m in self.mounts):
                self.report.note(at, subject, f"{point}: a system directory or a mount point used twice: write "
                                 "storage.mounts by hand")
            elif (server := self.mount_server(at, subject, get("server"))) is not False:
                m = {"path": point, "export": export, "_clients": list(clients), "_at": at, "_subject": subject}
                m |= {"server": server} if server is not None else {}
                m |= {"options": options} if options else {}
                self.mounts.append(m)
        if self.mounts:
            self.report.change(var.where, "nfs_mounts", "corral adds nosuid and nodev to every mount (setuid "
                               "binaries and device files on shared storage are not honoured); write suid or dev in "
                               "storage.mounts[].options to keep them", "storage.mounts[].options")

    def mount_server(self, at: str, subject: str, value: object) -> str | None | bool:
        """None: the spec's nfs node; an address or name: another server; False: not carried (noted)."""
        text = str(value or "").strip()
        m = SERVER_RE.match(text)
        hosts = self.inv.resolve(f"{m.group(1)}[{m.group(2)}]") if m else [text] if text in self.inv.hosts else None
        if hosts == [] or (hosts is None and ("{{" in text or not text)):
            self.report.note(at, subject, f"server {text!r} names no host the import can resolve: write "
                             "storage.mounts[].server")
            return False
        if hosts is None:  # a NAS outside the inventory
            return text
        name = self.names.get(hosts[0])
        if name is not None and name == self.server:
            return None
        address = self.addresses.get(name) if name else self.inv.host_var(hosts[0], "ansible_host")
        return address if isinstance(address, str) else str(address.value) if address is not None else False

    def lines(self) -> list[str]:
        """YAML under `storage:` (empty: nothing carried)."""
        out = []
        if self.exports:
            out.append("  exports:")
        for e in self.exports:
            extra = ", allow_root_equivalent: true" if e.get("allow_root_equivalent") else ""
            out.append(f"    - {{path: {json.dumps(e['path'])}, clients: {json.dumps(e['clients'])}, options: "
                       f"{json.dumps(e['options'])}{extra}}}  # DeepOps: {e['_deepops']}")
        if self.mounts:
            out.append("  mounts:")
        for m in self.mounts:
            keys = {k: v for k, v in m.items() if not k.startswith("_")} | self.who(m["_clients"])
            out.append("    - {" + ", ".join(f"{k}: {json.dumps(v)}" for k, v in keys.items()) + "}")
        return out

    def who(self, clients: list[str]) -> dict:
        """roles: when the clients are exactly the nodes of some roles, else a nodes: hostlist."""
        for roles in ROLE_SETS:
            if set(clients) == {n for n, r in self.roles.items() if set(r) & set(roles)}:
                return {"roles": list(roles)}
        expr = compress_names(sorted(clients))
        return {"nodes": expr if sorted(expand_names(expr)) == sorted(clients) else ",".join(sorted(clients))}
