"""Local accounts, pure: the commands that make one node's accounts (facts/accounts.py: Accounts) match
the spec's `groups:` and `users:`, the plan's diff lines, and corral's record after them.

- groups: `groupadd -g GID NAME`, for spec groups and the personal group (NAME, gid = uid) of a user
  without `group:`; users: `useradd -u UID -g GROUP [-G a,b] -s SHELL -d HOME -M -c NAME NAME` (the home
  is made once, on one node: deploy/users.py); a managed user whose primary group, supplementary groups
  (of those the spec knows: others the admin gave are kept), full name, home or shell differ: usermod.
- An existing account with the spec's name and uid that corral does not manage yet is adopted (recorded).
- A uid, gid or name the node already uses otherwise: a CorralError located like the spec
  (`users[1].uid: 2001 is already user bob's on gpu01`); no uid or gid is ever changed. That includes
  the directory's entries (`directory`: looked up by each spec name and number, facts/accounts.py
  AccountsByKey), which `getent passwd` does not list: a local account sharing a directory user's uid
  would own their files and see their jobs.
- A recorded user no longer in the spec: locked (`usermod -L -e 1 -s /usr/sbin/nologin`), recorded
  `locked`, the home kept; back in the spec: unlocked (`usermod -U -e ''`) with the spec's shell.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass, field

from corral.engine.pyinfra_seam import StringCommand

from corral.engine.shell import cmd
from corral.errors import CorralError
from corral.facts.accounts import RECORD, Accounts, Record
from corral.spec.models_users import Group, User

NOLOGIN = "/usr/sbin/nologin"
FIX_UID = "choose a free uid, or set uid: to the existing account's"
FIX_GID = "choose a free gid, or set gid: to the existing group's"


@dataclass
class AccountsPlan:
    commands: list[StringCommand] = field(default_factory=list)
    diff: list[str] = field(default_factory=list)
    record: dict[str, Record] = field(default_factory=dict)  # corral's record after the commands
    record_changed: bool = False
    summary: str = ""  # what a converged node is told


def record_text(record: dict[str, Record]) -> str:
    return "".join(f"{name} {r.uid} {r.state}\n" for name, r in sorted(record.items()))


class _Plan:
    def __init__(self, node: str, current: Accounts, directory: Accounts) -> None:
        self.node, self.cur, self.dir = node, current, directory
        self.out = AccountsPlan()
        self.problems: list[tuple[str, str, str]] = []  # (where, message, fix)

    def problem(self, where: str, message: str, fix: str) -> None:
        self.problems.append((where, message, fix))

    def change(self, diff: str, command: StringCommand | None = None) -> None:
        self.out.diff.append(diff)
        if command is not None:
            self.out.commands.append(command)

    def group(self, where: str, name: str, gid: int, personal: bool) -> None:
        have = self.cur.groups.get(name)
        what = f"the personal group {name} (gid = uid {gid})" if personal else f"group {name}"
        if have is not None:
            if have.gid != gid:
                self.problem(where, f"{what}: {name} exists on {self.node} with gid {have.gid}",
                             FIX_UID if personal else f"set gid: {have.gid}, or choose another name")
            return
        other = self.cur.group_of_gid(gid)
        if other is not None:
            self.problem(where, f"{gid} is already group {other}'s on {self.node}" + (f" ({what})" if personal else ""),
                         FIX_UID if personal else FIX_GID)
            return
        self.change(f"+ group {name} (gid {gid})", cmd("groupadd", "-g", gid, name))

    def user(self, i: int, u: User, primary: str, gid: int, home: str, known: set[str]) -> None:
        where, have, rec = f"users[{i}].uid", self.cur.passwd.get(u.name), self.cur.managed.get(u.name)
        if have is None:
            owner = self.cur.user_of_uid(u.uid)
            if owner is not None:
                self.problem(where, f"{u.uid} is already user {owner}'s on {self.node}", FIX_UID)
                return
            extra = ["-G", ",".join(u.groups)] if u.groups else []
            self.change(f"+ user {u.name} (uid {u.uid})",
                        cmd("useradd", "-u", u.uid, "-g", primary, *extra, "-s", u.shell, "-d", home, "-M",
                            "-c", u.full_name, u.name))
            self.out.record[u.name] = Record(u.uid, "active")
            return
        if have.uid != u.uid:
            self.problem(where, f"user {u.name} exists on {self.node} with uid {have.uid}", FIX_UID)
            return
        self.out.record[u.name] = Record(u.uid, "active")
        if rec is None:
            self.change(f"adopt user {u.name} (uid {u.uid}): an existing account, managed by corral from now on")
        flags, lines = [], []
        if have.gid != gid:
            was = self.cur.group_of_gid(have.gid) or str(have.gid)
            flags += ["-g", primary]
            lines.append(f"primary group {was} -> {primary}")
        member_of = sorted(g for g, e in self.cur.groups.items() if u.name in e.members)
        if {g for g in member_of if g in known} != set(u.groups):
            keep = [g for g in member_of if g not in known]  # groups the spec does not know: the admin's
            flags += ["-G", ",".join(sorted(set(keep) | set(u.groups)))]
            lines.append(f"groups {','.join(member_of) or '(none)'} -> "
                         f"{','.join(sorted(set(keep) | set(u.groups))) or '(none)'}")
        if have.gecos != u.full_name:
            flags += ["-c", u.full_name]
            lines.append(f"full name {have.gecos!r} -> {u.full_name!r}")
        if have.home != home:
            flags += ["-d", home]
            lines.append(f"home {have.home} -> {home} (nothing moved)")
        if have.shell != u.shell:
            flags += ["-s", u.shell]
            lines.append(f"shell {have.shell} -> {u.shell}")
        if (rec is not None and rec.state == "locked") or self.cur.expired(u.name):
            flags += ["-U", "-e", ""]
            self.out.diff.append(f"unlock user {u.name} (back in the spec)" if rec is not None and rec.state == "locked"
                                 else f"unlock user {u.name} (its account had expired)")
        self.out.diff += [f"~ user {u.name}: {line}" for line in lines]
        if flags:
            self.out.commands.append(cmd("usermod", *flags, u.name))

    def lock(self, name: str, rec: Record) -> None:
        have = self.cur.passwd.get(name)
        if have is None:  # deleted by someone else: remembered, so the accounting sync still removes it
            self.out.record[name] = Record(rec.uid, "locked")
            return
        if have.uid != rec.uid:  # the name is someone else's account now: not corral's to lock
            self.out.diff.append(f"forget user {name} (uid {have.uid} now, corral's was {rec.uid}: not corral's)")
            return
        self.out.record[name] = Record(rec.uid, "locked")
        if rec.state == "locked" and self.cur.expired(name) and have.shell == NOLOGIN:
            return
        self.change(f"lock user {name} (removed from the spec; home kept)",
                    cmd("usermod", "-L", "-e", "1", "-s", NOLOGIN, name))

    def directory_clashes(self, users: list[User], groups: list[Group]) -> None:
        """A spec name or id the directory also holds (the same name with the same id is the same account)."""
        for i, u in enumerate(users):
            owner = self.dir.user_of_uid(u.uid)
            entry = self.dir.passwd.get(u.name)
            if owner not in (None, u.name) or (entry is not None and entry.uid != u.uid):
                held = f"uid {u.uid} is the directory's user {owner}" if owner not in (None, u.name) else \
                    f"the directory has user {u.name} with uid {entry.uid}"
                self.problem(f"users[{i}].uid", f"{held} on {self.node} (not a local account)", FIX_UID)
        for i, g in enumerate(groups):
            owner = self.dir.group_of_gid(g.gid)
            entry = self.dir.groups.get(g.name)
            if owner not in (None, g.name) or (entry is not None and entry.gid != g.gid):
                held = f"gid {g.gid} is the directory's group {owner}" if owner not in (None, g.name) else \
                    f"the directory has group {g.name} with gid {entry.gid}"
                self.problem(f"groups[{i}].gid", f"{held} on {self.node} (not a local group)", FIX_GID)
        names = {g.name for g in groups}
        for i, u in enumerate(users):
            owner = self.dir.group_of_gid(u.uid)
            if u.group is None and u.name not in names and owner not in (None, u.name):
                self.problem(f"users[{i}].uid", f"the personal group's gid {u.uid} is the directory's group "
                             f"{owner} on {self.node}", FIX_UID)

    def raise_problems(self) -> None:
        if not self.problems:
            return
        where, message, fix = self.problems[0]
        more = self.problems[1:]
        if more:
            message += f" (and {len(more)} more: {'; '.join(f'{w}: {m}' for w, m, _ in more)})"
        raise CorralError(message, where=where, fix=fix)


def plan_accounts(users: list[User], groups: list[Group], homes: str, node: str, current: Accounts,
                  directory: Accounts | None = None) -> AccountsPlan:
    """What makes `current` (one node's accounts) match the spec's users and groups; raises CorralError
    for a name, uid or gid the node already uses otherwise, locally or (`directory`) in the directory.
    `homes`: identity.homes."""
    p = _Plan(node, current, directory or Accounts())
    p.directory_clashes(users, groups)
    gids = {g.name: g.gid for g in groups}
    for i, g in enumerate(groups):
        p.group(f"groups[{i}].gid", g.name, g.gid, personal=False)
    for i, u in enumerate(users):
        if u.group is None and u.name not in gids and current.user_of_uid(u.uid) in (None, u.name):
            p.group(f"users[{i}].uid", u.name, u.uid, personal=True)
    known = set(gids) | {u.name for u in users if u.group is None}
    for i, u in enumerate(users):
        primary = u.group or u.name
        p.user(i, u, primary, gids.get(primary, u.uid), posixpath.join(homes, u.name), known)
    names = {u.name for u in users}
    for name, rec in sorted(current.managed.items()):
        if name not in names:
            p.lock(name, rec)
    p.raise_problems()
    plan = p.out
    plan.record_changed = plan.record != current.managed
    if plan.record_changed and not plan.diff:
        plan.diff.append(f"~ {RECORD}: the users corral manages")
    locked = sum(r.state == "locked" for r in plan.record.values())
    plan.summary = (f"accounts match the spec (users: {len(users)}, groups: {len(groups)}"
                    + (f", removed and locked: {locked}, homes kept)" if locked else ")"))
    return plan
