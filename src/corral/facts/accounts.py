"""Local accounts of a node, read in one command each: LocalAccounts (`getent passwd`, `getent group`,
the shadow lock/expiry fields of the users corral manages, and corral's record of them), ManagedUsers
(the record alone: the accounting sync's question "whom did corral remove?"), HomeDirs (the entries of
a homes directory), SlurmAccount (the slurm user and group, and who holds Debian's uid/gid 64030 for it). The parsers are pure; deploy/users_plan.py plans from what they return.

corral's record, /var/lib/corral/users (0600 root), holds one line per user corral manages:
`NAME UID STATE`, STATE `active` or `locked` (removed from the spec: locked, home kept).
No password hash leaves the node: of shadow only whether the password field is locked ('!') and the
account's expiry day are printed.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field

from pyinfra.api import FactBase

from corral.errors import CorralError

RECORD = "/var/lib/corral/users"
SLURM_USER = "slurm"
SLURM_ID = 64030  # Debian's fixed uid and gid of slurm (the slurm-wlm packages'; base-passwd's 60000-64999 range)
STATES = ("active", "locked")
_SHADOW = ("getent shadow | awk -F: -v f=" + RECORD + " 'BEGIN { while ((getline l < f) > 0) { split(l, a, \" \"); "
           "m[a[1]] = 1 } } ($1 in m) { print \"S|\" $1 \"|\" (substr($2, 1, 1) == \"!\" ? \"L\" : \"P\") "
           "\"|\" $8 }'")


@dataclass(frozen=True)
class PasswdEntry:
    uid: int
    gid: int
    gecos: str
    home: str
    shell: str


@dataclass(frozen=True)
class GroupEntry:
    gid: int
    members: tuple[str, ...] = ()


@dataclass(frozen=True)
class Record:
    """One line of corral's record: a user corral manages on this node."""

    uid: int
    state: str  # active | locked


@dataclass(frozen=True)
class Shadow:
    """The lock-related shadow fields of a managed user."""

    password_locked: bool  # the password field starts with '!' (also true of an account never given one)
    expires: int | None  # days since 1970-01-01; corral locks with 1 (expired), unlocks with none


@dataclass
class Accounts:
    passwd: dict[str, PasswdEntry] = field(default_factory=dict)
    groups: dict[str, GroupEntry] = field(default_factory=dict)
    managed: dict[str, Record] = field(default_factory=dict)
    shadow: dict[str, Shadow] = field(default_factory=dict)

    def expired(self, name: str) -> bool:
        """The account has an expiry day: corral's lock (-e 1); an active managed user has none."""
        entry = self.shadow.get(name)
        return entry is not None and entry.expires is not None

    def user_of_uid(self, uid: int) -> str | None:
        return next((n for n, p in self.passwd.items() if p.uid == uid), None)

    def group_of_gid(self, gid: int) -> str | None:
        return next((n for n, g in self.groups.items() if g.gid == gid), None)


def _int(text: str, what: str, line: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise CorralError(f"unexpected {what}: not a number", value=line,
                          fix="check the node's account databases (getent passwd, getent group)") from None


def parse_record(lines: list[str]) -> dict[str, Record]:
    """corral's record (`NAME UID STATE` lines); blank lines and # comments are skipped."""
    out: dict[str, Record] = {}
    for line in lines:
        words = line.split()
        if not words or words[0].startswith("#"):
            continue
        if len(words) != 3 or not words[1].isdigit() or words[2] not in STATES:
            raise CorralError(f"{RECORD}: a line that is not `NAME UID active|locked`", value=line,
                              fix=f"correct or remove the line in {RECORD} on the node")
        out[words[0]] = Record(int(words[1]), words[2])
    return out


def parse_accounts(lines: list[str]) -> Accounts:
    """LocalAccounts' output: P|passwd line, G|group line, R|record line, S|name|L or P|expiry day."""
    acc, record = Accounts(), []
    for line in lines:
        kind, _, rest = line.partition("|")
        if kind == "P":
            f = rest.split(":")
            if len(f) != 7:
                raise CorralError("unexpected `getent passwd` line", value=rest,
                                  fix="check the node's passwd database")
            acc.passwd[f[0]] = PasswdEntry(_int(f[2], "passwd uid", rest), _int(f[3], "passwd gid", rest),
                                           f[4], f[5], f[6])
        elif kind == "G":
            f = rest.split(":")
            if len(f) != 4:
                raise CorralError("unexpected `getent group` line", value=rest, fix="check the node's group database")
            acc.groups[f[0]] = GroupEntry(_int(f[2], "group gid", rest), tuple(m for m in f[3].split(",") if m))
        elif kind == "R":
            record.append(rest)
        elif kind == "S":
            name, _, tail = rest.partition("|")
            locked, _, expires = tail.partition("|")
            acc.shadow[name] = Shadow(locked == "L", int(expires) if expires.strip().isdigit() else None)
    acc.managed = parse_record(record)
    return acc


class LocalAccounts(FactBase):
    """passwd, groups, corral's record and the managed users' lock fields (Accounts)."""

    def command(self) -> str:
        return ("getent passwd | sed 's/^/P|/'; getent group | sed 's/^/G|/'; "
                f"if [ -r {RECORD} ]; then sed 's/^/R|/' {RECORD}; {_SHADOW}; fi; true")

    def default(self) -> Accounts:
        return Accounts()

    def process(self, output: list[str]) -> Accounts:
        return parse_accounts(list(output))


class ManagedUsers(FactBase):
    """corral's record alone: name -> Record ({} where there is none)."""

    def command(self) -> str:
        return f"cat {RECORD} 2>/dev/null; true"

    def default(self) -> dict[str, Record]:
        return {}

    def process(self, output: list[str]) -> dict[str, Record]:
        return parse_record(list(output))


class HomeDirs(FactBase):
    """The names in a homes directory (sorted; [] where it does not exist)."""

    def command(self, base: str) -> str:
        return f"find {shlex.quote(base)} -mindepth 1 -maxdepth 1 -printf '%f\\n' 2>/dev/null; true"

    def default(self) -> list[str]:
        return []

    def process(self, output: list[str]) -> list[str]:
        return sorted(line for line in output if line)


class AccountsByKey(FactBase):
    """The passwd and group entries of the given names and ids as the node resolves them one by one
    (`getent passwd KEY...`: local files and the directory through SSSD, which `getent passwd` alone does
    not list without enumeration): what else holds a spec user's or group's name or number."""

    def command(self, users: list[str], groups: list[str]) -> str:
        # the keys are spec names and numbers (typed); quoted all the same. `getent` exits 2 when a key is
        # not found and prints the others
        return (f"getent passwd {' '.join(shlex.quote(str(k)) for k in users)} | sed 's/^/P|/'; "
                f"getent group {' '.join(shlex.quote(str(k)) for k in groups)} | sed 's/^/G|/'; true")

    def default(self) -> Accounts:
        return Accounts()

    def process(self, output: list[str]) -> Accounts:
        return parse_accounts(list(output))


def not_local(found: Accounts, local: Accounts) -> Accounts:
    """The entries of `found` that the node's own enumeration (`getent passwd`, LocalAccounts) does not
    list as they are: the directory's (or another NSS source's)."""
    return Accounts(passwd={n: e for n, e in found.passwd.items() if local.passwd.get(n) != e},
                    groups={n: e for n, e in found.groups.items()
                            if n not in local.groups or local.groups[n].gid != e.gid})


class SlurmAccount(FactBase):
    """The passwd and group entries named slurm and those with id 64030 (Accounts: passwd, groups), as
    the node resolves them (`getent`: local files, or LDAP through SSSD)."""

    def command(self) -> str:
        return (f"getent passwd {SLURM_USER} {SLURM_ID} | sed 's/^/P|/'; "
                f"getent group {SLURM_USER} {SLURM_ID} | sed 's/^/G|/'; true")

    def default(self) -> Accounts:
        return Accounts()

    def process(self, output: list[str]) -> Accounts:
        return parse_accounts(list(output))
