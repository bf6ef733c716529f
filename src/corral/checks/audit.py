"""`corral audit`: each node's attack surface, listed and compared with what the cluster declares. Read-only.

For every node (facts: checks/audit_facts.py, one bounded command):
- every listening socket, with its process, unit and user;
- every process running as root;
- setuid/setgid files, with the package that owns each and whether it is as packaged;
- world-writable directories without the sticky bit;
- sudo rules (and the members of group sudo), and who may use cron and at.

Each entry is declared by what runs there: the components' daemons (components/daemons.py: unit, user and why,
root processes, listeners), the release's own base (systemd, sshd, root's SSH sessions), corral's own sudo rule
(render/jupyterhub.py) and the site's `audit.declared` entries. Anything else is a finding; `evaluate` is pure."""

from __future__ import annotations

import fnmatch
import ipaddress
from dataclasses import dataclass, field
from pathlib import Path

import gevent

from corral.checks.audit_facts import AuditFacts
from corral.components import Daemon
from corral.components.daemons import declared_sudo, site_daemons
from corral.components.views import declared_daemons
from corral.engine.pyinfra_seam import as_host
from corral.render.adopt import job_free
from corral.spec.cluster import Cluster, Node
from corral.spec.models_users import SYSTEM_IDS, UID_MIN

SESSIONS = ("ssh.service", "user@0.service")  # root's SSH sessions (corral's, an admin's); session-N.scope too
USERS_LOWEST_PORT = 1024


@dataclass
class Item:
    node: str
    kind: str              # listener | root process | setuid | open directory | sudo | cron | at
    what: str
    declared: str | None   # why it is there (its declaration), None: undeclared, a finding

    def to_json(self) -> dict:
        return {"node": self.node, "kind": self.kind, "what": self.what, "declared": self.declared is not None,
                "why": self.declared}


@dataclass
class Audit:
    items: list[Item] = field(default_factory=list)
    errors: dict[str, str] = field(default_factory=dict)  # node -> why it was not audited

    @property
    def findings(self) -> list[Item]:
        return [i for i in self.items if i.declared is None]

    @property
    def ok(self) -> bool:
        return not self.findings and not self.errors

    def to_json(self) -> dict:
        return {"ok": self.ok, "findings": len(self.findings), "unreachable": self.errors,
                "items": [i.to_json() for i in self.items]}


def gather(cluster: Cluster, names: list[str] | None = None) -> tuple[dict[str, dict], dict[str, str]]:
    """(facts per node audited, error per node not), read in parallel over corral's SSH."""
    from corral.engine import run
    facts: dict[str, dict] = {}

    def hook(state, hosts) -> None:
        def one(h) -> None:
            with as_host(state, h):
                data = h.get_fact(AuditFacts, _timeout=180)
            if data is not None:
                facts[h.name] = data
        gevent.joinall([gevent.spawn(one, h) for h in hosts])

    result = run(cluster, [], mode="plan", command="audit", record=False, prepare=hook, limit=names)
    errors = {n: (r.error or "unreachable") for n, r in result.nodes.items() if not r.reachable or r.error}
    errors.update({n: "no answer from the audit's command" for n in result.nodes if n not in facts and n not in errors})
    return facts, errors


def _where(address: str, node: Node) -> str:
    if address in ("0.0.0.0", "::", "*"):
        return "any"
    try:
        if ipaddress.ip_address(address).is_loopback:
            return "local"
    except ValueError:
        return "other"
    return "cluster" if address == node.address else "other"


def _self(facts: dict) -> set[int]:
    """The audit's own processes: its shell and what it runs, and the SSH session above it (not sshd itself)."""
    procs, chain = facts["procs"], facts["self"]
    if not chain:
        return set()
    own = {pid for pid in chain if procs.get(pid, {}).get("ppid") != 1}
    grown = True
    while grown:
        grown = False
        for pid, p in procs.items():
            if pid not in own and p["ppid"] in own and p["ppid"] not in chain[1:]:
                own.add(pid)
                grown = True
    return own


def _daemon(unit: str, daemons: tuple[Daemon, ...]) -> Daemon | None:
    """The declaration of `unit`: by its name, else by a glob (getty@*.service)."""
    return next((d for d in daemons if d.unit == unit), None) or next(
        (d for d in daemons if fnmatch.fnmatchcase(unit, d.unit)), None)


def _root_process(p: dict, daemons: tuple[Daemon, ...]) -> str | None:
    unit, comm = p["unit"], p["comm"]
    d = _daemon(unit, daemons)
    if d is not None and (comm in d.root or "*" in d.root):
        return d.why
    if unit in SESSIONS or (unit.startswith("session-") and unit.endswith(".scope")):
        return "root's SSH session (corral's, or an admin's)"
    if comm.startswith("(sd-"):
        return "systemd's own short-lived helper"
    return None


def _listener(entry: dict, procs: dict, daemons: tuple[Daemon, ...], node: Node) -> tuple[str, str | None]:
    where = _where(entry["address"], node)
    p = next((procs[pid] for pid in entry["pids"] if pid in procs), None)
    owner = f"{p['comm']} ({p['unit']}, {p['user']})" if p else "the kernel (no process)"
    what = f"{entry['proto']} {entry['address']}:{entry['port']} {owner}"
    if p is not None and UID_MIN <= p["uid"] < SYSTEM_IDS[0]:
        ok = entry["port"] >= USERS_LOWEST_PORT
        return what, "a user's own process (unprivileged port)" if ok else None
    d = _daemon(p["unit"] if p else "kernel", daemons)
    if d is None:
        return what, None
    for listener in d.listens:
        if listener.port in (0, entry["port"]) and entry["proto"].startswith(listener.proto) and (
                listener.on == "any" or listener.on == where):
            return what, f"{d.unit}: {listener.who}"
    return what, None


def _cron(node: Node, facts: dict, confined: list[str] | None, tool: str, daemon: str) -> list[Item]:
    """Who may use cron or at: on a compute node that admits users only inside jobs, root alone (an entry of
    theirs would run outside every job); elsewhere whoever may log in there."""
    if daemon not in facts["has"]:
        return []
    allow, deny = facts["acl"].get(f"/etc/{tool}.allow"), facts["acl"].get(f"/etc/{tool}.deny")
    who = ("only " + ", ".join(allow)) if allow is not None else (
        "everyone but " + ", ".join(deny) if deny else "everyone")
    if confined is None:
        return [Item(node.name, tool, f"{tool}: {who}", "users may log in here (not a job-confined compute node)")]
    ok = allow is not None and set(allow) <= set(confined)
    return [Item(node.name, tool, f"{tool}: {who}", "those who may log in without a job" if ok else None)]


def evaluate_node(cluster: Cluster, node: Node, facts: dict) -> list[Item]:
    daemons = (*declared_daemons(cluster, node), *site_daemons(cluster, node))
    procs, own = facts["procs"], _self(facts)
    items = []
    for entry in facts["listen"]:
        what, why = _listener(entry, procs, daemons, node)
        items.append(Item(node.name, "listener", what, why))
    for pid, p in sorted(procs.items()):
        if p["uid"] != 0 or pid in own or pid == 2 or p["ppid"] == 2:
            continue  # not root, the audit itself, or a kernel thread
        items.append(Item(node.name, "root process", f"{p['comm']} (pid {pid}, {p['unit']})", _root_process(p, daemons)))
    for f in facts["suid"]:
        why = f"from package {f['package']}, as packaged" if f["package"] and f["state"] == "packaged" else None
        state = "not from any package" if not f["package"] else f"from package {f['package']}, {f['state']}"
        items.append(Item(node.name, "setuid", f"{f['path']} ({f['mode']} {f['owner']}; {state})", why))
    items += [Item(node.name, "open directory", f"{d} (world-writable, no sticky bit)", None) for d in facts["open"]]
    sudo, ssh_user = declared_sudo(cluster, node), cluster.spec.ssh.user
    for path, line in facts["sudo"]:
        mine = ssh_user != "root" and line.split()[0] == ssh_user
        why = sudo.get((path, " ".join(line.split()))) or ("corral's SSH user (ssh.user)" if mine else None)
        items.append(Item(node.name, "sudo", f"{path}: {line}", why))
    for user in facts["sudo_group"]:
        ok = user == ssh_user
        items.append(Item(node.name, "sudo", f"group sudo: {user} (may become root)", "corral's SSH user" if ok else None))
    identity = cluster.spec.identity
    confined = (job_free(cluster.spec.ssh.user, identity.adopt_exempt_users) if identity.pam_slurm_adopt
                and "compute" in node.roles and "login" not in node.roles else None)
    items += _cron(node, facts, confined, "cron", "cron") + _cron(node, facts, confined, "at", "atd")
    if confined is not None:
        items += [Item(node.name, "cron", f"crontab of {user}", "may log in without a job" if user in confined
                       else None) for user in facts["crontabs"]]
    return items


def trust(cluster: Cluster) -> list[Item]:
    """The cluster's CA, which every node trusts for every use (security review 3, N16): a finding while it
    carries no name constraints (made before corral added them), with the way to a constrained one."""
    from corral import site_ca
    from corral.components import gates
    state = site_ca.constrained(cluster.state_dir)
    if state is None or not any(gates.cluster_ca(cluster, n) for n in cluster.nodes):
        return []
    where = Path(cluster.state_dir) / "secrets" / "ca"
    what = (f"the cluster CA ({where}/ca.pem) in every node's trust store" if state else
            f"the cluster CA ({where}/ca.pem) in every node's trust store vouches for any name: it has no name "
            f"constraints (made before corral added them); move {where} away and apply to make a constrained one "
            "(browsers must import the new CA)")
    return [Item("control host", "trust", what, "name-constrained to the cluster's names and addresses" if state
                 else None)]


def evaluate(cluster: Cluster, facts: dict[str, dict], errors: dict[str, str]) -> Audit:
    audit = Audit(errors=dict(errors))
    for node in cluster.nodes:
        if node.name in facts:
            audit.items += evaluate_node(cluster, node, facts[node.name])
    audit.items += trust(cluster)
    return audit


def audit(cluster: Cluster, names: list[str] | None = None) -> Audit:
    return evaluate(cluster, *gather(cluster, names))
