"""Accounting sync, pure: QUERY_COMMANDS read slurmdbd (`sacctmgr -nP`), parse_state reads their
output, plan_sync returns the `sacctmgr -i` lines that make the database match the spec: cluster,
QOS, accounts (parents first), users (slurm.accounts[].users and `users:` with their `accounts:`; a spec
user's first account is its DefaultAccount, its default_qos the DefaultQOS of its associations).
One deletion only: a user corral managed that left the spec (`removed`, from the node's record of
deploy/users.py) loses its associations on this cluster; anything else only the database has is `extra`.
sacctmgr shows MaxWall as [D-]HH:MM:SS, MaxTRESPU as gres/gpu=4, lists comma-separated, an unset
PreemptMode as 'cluster' and an unset limit as an empty field.
"""

from __future__ import annotations

import math
import re
import shlex
from collections.abc import Iterable
from dataclasses import dataclass, field

from corral.errors import CorralError
from corral.spec.models import QOS, Account, ClusterSpec

QUERY_COMMANDS: dict[str, str] = {
    "clusters": "sacctmgr -nP show cluster format=Cluster",
    "qos": "sacctmgr -nP show qos format=Name,Priority,MaxTRESPU,MaxJobsPU,MaxWall,Preempt,PreemptMode",
    "accounts": "sacctmgr -nP show account format=Account,Description,Organization",
    "assocs": "sacctmgr -nP show assoc format=Cluster,Account,User,ParentName,Share,QOS,DefaultQOS",
    "users": "sacctmgr -nP show user format=User,DefaultAccount",
}
BUILTIN_ACCOUNT, BUILTIN_USER, BUILTIN_QOS = "root", "root", "normal"
GPU_TRES = "gres/gpu"
_BAD_NAME = re.compile(r"[,'\"\s\x00-\x1f]|^$")  # sacctmgr splits at ',', alters quotes, trims


@dataclass(frozen=True)
class QosState:
    name: str
    priority: int = 0
    max_gpus_per_user: int | None = None
    max_jobs_per_user: int | None = None
    max_wall_min: int | None = None
    preempt: frozenset[str] = frozenset()
    preempt_mode: str = "off"  # sacctmgr shows an unset mode as 'cluster'


@dataclass(frozen=True)
class Assoc:
    cluster: str
    account: str
    user: str  # '' for an account's own association
    parent: str  # ParentName, set on account associations only
    share: str  # a number or 'parent'
    qos: frozenset[str]
    default_qos: str


@dataclass
class AcctState:
    clusters: list[str] = field(default_factory=list)
    qos: dict[str, QosState] = field(default_factory=dict)
    accounts: dict[str, tuple[str, str]] = field(default_factory=dict)  # name -> (description, org)
    assocs: list[Assoc] = field(default_factory=list)
    default_accounts: dict[str, str] = field(default_factory=dict)  # user (lowercase) -> DefaultAccount


@dataclass
class SyncPlan:
    commands: list[str] = field(default_factory=list)  # empty: converged
    extra: list[str] = field(default_factory=list)  # only in the database; reported, never deleted


def wall_minutes(text: str | None) -> int | None:
    """A Slurm time limit in minutes, rounded up as sacctmgr does; None for unset/INFINITE."""
    if text is None or text.strip().upper() in ("", "INFINITE", "UNLIMITED", "-1"):
        return None
    days, _, rest = text.strip().rpartition("-")
    parts = [int(p) for p in rest.split(":")]
    if not days and len(parts) < 3:  # minutes[:seconds]
        parts = [0] + parts + [0] * (2 - len(parts))
    h, m, s = (parts + [0, 0])[:3]  # [days-]hours[:minutes[:seconds]]
    return math.ceil((int(days or 0) * 86400 + h * 3600 + m * 60 + s) / 60)


def _rows(text: str, n: int, what: str) -> list[list[str]]:
    rows = [line.split("|") for line in text.splitlines() if line.strip()]
    for cols in rows:  # only an account's description may hold a '|'
        if len(cols) < n or (len(cols) > n and what != "accounts"):
            raise CorralError(f"unexpected sacctmgr {what} output: {len(cols)} fields, expected {n}",
                              value="|".join(cols), fix=f"run: {QUERY_COMMANDS[what]}")
    return rows


def _int(text: str) -> int | None:
    return int(text) if text.strip() else None


def _names(text: str) -> frozenset[str]:
    return frozenset(n for n in text.split(",") if n)


def parse_state(outputs: dict[str, str]) -> AcctState:
    """Outputs keyed by QUERY_COMMANDS key (or by the command itself); a missing one reads as empty."""
    out = {key: outputs.get(key, outputs.get(cmd, "")) for key, cmd in QUERY_COMMANDS.items()}
    state = AcctState(clusters=[r[0] for r in _rows(out["clusters"], 1, "clusters")])
    for name, prio, tres, jobs, wall, preempt, mode in _rows(out["qos"], 7, "qos"):
        tres_map = dict(t.split("=", 1) for t in tres.split(",") if "=" in t)
        mode = "off" if mode.lower() in ("", "cluster") else mode.lower()
        state.qos[name] = QosState(name, _int(prio) or 0, _int(tres_map.get(GPU_TRES, "")), _int(jobs),
                                   wall_minutes(wall), _names(preempt), mode)
    for cols in _rows(out["accounts"], 3, "accounts"):
        state.accounts[cols[0]] = ("|".join(cols[1:-1]), cols[-1])
    for cluster, acct, user, parent, share, qos, dqos in _rows(out["assocs"], 7, "assocs"):
        state.assocs.append(Assoc(cluster, acct, user, parent, share, _names(qos), dqos))
    for user, default in _rows(out["users"], 2, "users"):
        state.default_accounts[user.lower()] = default
    return state


def _cmd(*tokens: str) -> str:
    return "sacctmgr -i " + " ".join(shlex.quote(t) for t in tokens)


def _upsert(entity: str, where: list[str], exists: bool, tokens: list[str]) -> list[str]:
    if not exists:
        return [_cmd("add", entity, *where, *tokens)]
    return [_cmd("modify", entity, "where", *where, "set", *tokens)] if tokens else []


def _qos_settings(q: QOS, have: QosState | None, preempt_ok: bool) -> list[str]:
    """`Key=value` tokens that make `have` (None: a new QOS, defaults) equal the spec's QOS."""
    h, gpus, jobs, wall = have or QosState(q.name), q.max_gpus_per_user, q.max_jobs_per_user, q.max_wall
    return [token for differs, token in (  # -1 clears a limit; an empty Preempt= clears the list
        (q.priority != h.priority, f"Priority={q.priority}"),
        (gpus != h.max_gpus_per_user, f"MaxTRESPerUser={GPU_TRES}={-1 if gpus is None else gpus}"),
        (jobs != h.max_jobs_per_user, f"MaxJobsPerUser={-1 if jobs is None else jobs}"),
        (wall_minutes(wall) != h.max_wall_min, f"MaxWall={-1 if wall_minutes(wall) is None else wall}"),
        (preempt_ok and frozenset(q.preempt) != h.preempt, "Preempt=" + ",".join(q.preempt)),
        (q.preempt_mode != h.preempt_mode, f"PreemptMode={q.preempt_mode}")) if differs]


def _assoc_settings(a: Account, have: Assoc | None) -> list[str]:
    """QOS list and default QOS of an account's and its users' associations (unset in the spec: kept)."""
    return [token for differs, token in (
        (a.qos and (not have or set(a.qos) != have.qos), "QOS=" + ",".join(a.qos)),
        (a.default_qos and (not have or a.default_qos != have.default_qos), f"DefaultQOS={a.default_qos}"),
    ) if differs]


def _members(a: Account, spec: ClusterSpec) -> list[str]:
    """The users of an account: slurm.accounts[].users, then the spec users naming it (once each)."""
    names = list(a.users)
    seen = {n.lower() for n in names}
    for u in spec.users:
        if a.name in u.accounts and u.name.lower() not in seen:
            names.append(u.name)
            seen.add(u.name.lower())
    return names


def _user_settings(a: Account, have: Assoc | None, default_qos: str | None) -> list[str]:
    """A user association's settings: the account's, with the user's own default QOS (if any) instead."""
    tokens = [t for t in _assoc_settings(a, have) if not (default_qos and t.startswith("DefaultQOS="))]
    if default_qos and (not have or have.default_qos != default_qos):
        tokens.append(f"DefaultQOS={default_qos}")
    return tokens


def _parents_first(accounts: list[Account]) -> list[Account]:
    by_name, ordered = {a.name: a for a in accounts}, {}
    def visit(a: Account, path: tuple[str, ...] = ()) -> None:
        if a.name not in ordered and a.name not in path:  # a parent cycle: sacctmgr reports it
            if a.parent in by_name:
                visit(by_name[a.parent], path + (a.name,))
            ordered[a.name] = a
    for a in accounts:
        visit(a)
    return list(ordered.values())


def plan_sync(cluster: object, state: AcctState, removed: Iterable[str] = ()) -> SyncPlan:
    """Commands that make slurmdbd match the spec (`cluster`: a Cluster or a ClusterSpec); `removed`:
    users corral managed that left the spec: their associations on this cluster are deleted (unless
    slurm.accounts still lists them)."""
    spec: ClusterSpec = getattr(cluster, "spec", cluster)  # type: ignore[assignment]
    name, slurm, plan = spec.name, spec.slurm, SyncPlan()
    plan.commands += _upsert("cluster", [f"Name={name}"], name in state.clusters, [])

    available, deferred = set(state.qos), []
    for q in slurm.qos:
        have = state.qos.get(q.name)
        preempt_ok = set(q.preempt) <= available  # else it preempts a QOS created further down
        if not preempt_ok and set(q.preempt) != (have.preempt if have else set()):
            deferred += _upsert("qos", [f"Name={q.name}"], True, ["Preempt=" + ",".join(q.preempt)])
        plan.commands += _upsert("qos", [f"Name={q.name}"], have is not None,
                                 _qos_settings(q, have, preempt_ok))
        available.add(q.name)
    plan.commands += deferred

    acct_assoc = {a.account: a for a in state.assocs if a.cluster == name and not a.user}
    user_assoc = {(a.account, a.user.lower()): a for a in state.assocs if a.cluster == name and a.user}
    accounts = _parents_first(slurm.accounts)
    for a in accounts:
        have = acct_assoc.get(a.name)
        parent = "" if a.name == BUILTIN_ACCOUNT else (a.parent or BUILTIN_ACCOUNT)
        if have is None and a.name == BUILTIN_ACCOUNT:  # `add cluster` creates it like this
            have = Assoc(name, BUILTIN_ACCOUNT, "", "", "1", frozenset({BUILTIN_QOS}), "")
        tokens = [f"Parent={parent}"] if parent and (not have or have.parent != parent) else []
        tokens += [f"Fairshare={a.fairshare}"] if not have or have.share != str(a.fairshare) else []
        plan.commands += _upsert("account", [f"Name={a.name}", f"Cluster={name}"], have is not None,
                                 tokens + _assoc_settings(a, have))

    wanted_users: set[tuple[str, str]] = set()
    defaults = {u.name.lower(): u.default_qos for u in spec.users}
    first_add: dict[str, str] = {}  # a user new to the database: the account of its first add
    for a in accounts:
        for user in _members(a, spec):
            if _BAD_NAME.search(user):
                raise CorralError(f"account {a.name!r}: a user name sacctmgr cannot take", value=user,
                                  fix="use a login name without commas, quotes, blanks or control characters")
            wanted_users.add((a.name, user.lower()))
            have = user_assoc.get((a.name, user.lower()))
            if have is None:
                first_add.setdefault(user.lower(), a.name)
            plan.commands += _upsert("user", [f"Name={user}", f"Account={a.name}", f"Cluster={name}"],
                                     have is not None, _user_settings(a, have, defaults.get(user.lower())))
    for u in spec.users:  # the first account is the default: set when the adds made another one
        known = state.default_accounts.get(u.name.lower()) or first_add.get(u.name.lower())
        if u.accounts and known != u.accounts[0]:
            plan.commands.append(_cmd("modify", "user", "where", f"Name={u.name}", f"Cluster={name}", "set",
                                      f"DefaultAccount={u.accounts[0]}"))
    wanted = {user for _, user in wanted_users}
    deleted = set()
    for user in sorted(r for r in removed if r.lower() not in wanted):  # from the node's record: corral's
        if _BAD_NAME.search(user):
            raise CorralError("a removed user's name sacctmgr cannot take", value=user,
                              fix="correct /var/lib/corral/users on the controller")
        if any(a.cluster == name and a.user.lower() == user.lower() for a in state.assocs):
            deleted.add(user.lower())
            plan.commands.append(_cmd("delete", "user", "where", f"name={user}", f"cluster={name}"))

    plan.extra += [f"qos {q}" for q in sorted(set(state.qos) - {q.name for q in slurm.qos} - {BUILTIN_QOS})]
    elsewhere = {a.account for a in state.assocs if a.cluster != name} - set(acct_assoc)  # other clusters'
    db_accts = (set(state.accounts) | set(acct_assoc)) - elsewhere - {a.name for a in accounts}
    plan.extra += [f"account {a}" for a in sorted(db_accts - {BUILTIN_ACCOUNT})]
    plan.extra += [f"user {u} (account {acct})" for (acct, u) in sorted(user_assoc)
                   if (acct, u) not in wanted_users and (acct, u) != (BUILTIN_ACCOUNT, BUILTIN_USER)
                   and u not in deleted]
    return plan
