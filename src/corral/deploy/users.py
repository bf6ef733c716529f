"""users (every node, when the spec has users or groups, or corral manages users there): local accounts
(deploy/users_plan.py plans them from facts/accounts.py), corral's record of them (/var/lib/corral/users,
0600 root), SSH keys as root-owned files on the nodes users log in to (spec/access.py: login nodes, compute nodes
under pam_slurm_adopt; removed elsewhere) (/etc/ssh/authorized_keys/NAME, read by sshd through the drop-in
/etc/ssh/sshd_config.d/corral-users.conf: checked with `sshd -t`, put back when refused, ssh reloaded),
and homes: made once (0700, from /etc/skel) on the node that holds them (spec/shared.py: home_maker),
never changed once there, never deleted.
"""

from __future__ import annotations

import hashlib
import posixpath

from pyinfra import host
from pyinfra.api import deploy, operation
from pyinfra.facts.files import FileContents

from corral.deploy import operations
from corral.deploy.installs import installs
from corral.deploy.nodestate import Want, register, register_for_run, snapshot
from corral.deploy.users_plan import plan_accounts, record_text
from corral.engine.notes import annotate
from corral.engine.shell import cmd, q, sh
from corral.facts.accounts import RECORD, Accounts, AccountsByKey, HomeDirs, LocalAccounts, not_local
from corral.spec.access import users_log_in
from corral.spec.models_users import Group, User
from corral.spec.shared import home_maker

KEYS_DIR = "/etc/ssh/authorized_keys"
SSHD_CONFIG = "/etc/ssh/sshd_config"
DROPIN = "/etc/ssh/sshd_config.d/corral-users.conf"
PREV = f"{DROPIN}.corral-prev"
SKEL = "/etc/skel"
SSH_UNITS = ("ssh", "sshd")  # Debian's unit, and the RHEL family's (an alias of ssh on Debian)
DROPIN_TEXT = ("# Managed by corral: the keys of the spec's users are root-owned files in /etc/ssh/authorized_keys\n"
               "AuthorizedKeysFile .ssh/authorized_keys .ssh/authorized_keys2 /etc/ssh/authorized_keys/%u\n")
WANT = register(Want(paths=(KEYS_DIR, DROPIN), services=SSH_UNITS, packages=("openssh-server",)))


def key_file(name: str) -> str:
    return f"{KEYS_DIR}/{name}"


def keys_text(user: User) -> str:
    """The user's key file (key_file): one public key a line."""
    return "".join(f"{k}\n" for k in user.ssh_keys)


@installs(lambda **_: {RECORD: None})  # corral's record, made from the node's accounts
@operation()
def accounts(users: list[User], groups: list[Group], homes: str, node: str, current: Accounts,
             directory: Accounts | None = None):
    """Groups and users as the spec says, removed users locked, corral's record rewritten after a change;
    refused when a spec name or id is the directory's (`directory`: facts/accounts.py AccountsByKey)."""
    plan = plan_accounts(users, groups, homes, node, current, directory)
    if not plan.commands and not plan.record_changed:
        host.noop(plan.summary)
        return
    annotate(disruption="none", diff="".join(f"{line}\n" for line in plan.diff))
    yield from plan.commands
    if plan.record_changed:
        yield from operations.install_commands(RECORD, record_text(plan.record).encode(), "600", "root", "root")


@operation()
def absent(paths: list[str], want: Want, what: str):
    """Files that must not be there (e.g. the SSH keys of a removed user): removed."""
    files = snapshot(want).files
    there = [p for p in paths if files.get(p) is not None]
    if not there:
        host.noop(f"no {what}")
        return
    annotate(disruption="none", diff="".join(f"- {p}\n" for p in there))
    yield cmd("rm", "-f", "--", *there)


def backup_script() -> str:
    return f"if [ -e {q(DROPIN)} ]; then cp -p {q(DROPIN)} {q(PREV)}; else rm -f {q(PREV)}; fi"


def check_script() -> str:
    """sshd -t on the whole configuration with the new drop-in; refused: the previous one back (or none)."""
    return (f"if sshd -t -f {q(SSHD_CONFIG)}; then rm -f {q(PREV)}; else rc=$?; "
            f"if [ -e {q(PREV)} ]; then mv -f {q(PREV)} {q(DROPIN)}; else rm -f {q(DROPIN)}; fi; "
            f"echo {q(f'sshd -t refused the configuration with {DROPIN}: the previous one is back')} >&2; "
            "exit $rc; fi")


@installs(lambda content, **_: {DROPIN: content})
@operation()
def sshd_dropin(content: str, want: Want):
    """The drop-in that lets sshd read /etc/ssh/authorized_keys/%u: installed, checked with `sshd -t`
    (put back when refused), then a running ssh daemon reloaded (never restarted)."""
    snap = snapshot(want)
    if "openssh-server" not in snap.packages:
        host.noop("no OpenSSH server installed: no sshd drop-in")
        return
    data = content.encode()
    cur = snap.files.get(DROPIN)
    if cur and cur.get("sha256") == hashlib.sha256(data).hexdigest() and \
            (cur["mode"], cur["user"], cur["group"]) == ("644", "root", "root"):
        host.noop(f"{DROPIN} up to date")
        return
    unit = next((u for u in SSH_UNITS if snap.services.get(u, ("",))[0] == "active"), None)
    old = host.get_fact(FileContents, path=DROPIN) if cur else None
    annotate(disruption=f"reload {unit}" if unit else "none (no ssh daemon running)",
             diff=operations._diff(DROPIN, old, content))
    yield sh(backup_script())
    yield from operations.install_commands(DROPIN, data, "644", "root", "root")
    yield sh(check_script())
    if unit:
        yield cmd("systemctl", "reload", unit)


def home_script(path: str, uid: int, gid: int) -> str:
    """Made only when nothing is there (not even a dangling link): 0700, the user's, a copy of /etc/skel.
    Root fills a directory only root can enter, gives its contents away without following links (find
    and chown -h), and the directory itself last: the user can place nothing in it while root writes
    there (the old order, the directory the user's before the copy, let a planted .bashrc symlink
    turn root's copy into a write anywhere)."""
    return (f"if [ -e {q(path)} ] || [ -L {q(path)} ]; then echo {q(f'{path} exists: left as it is')}; else "
            f"install -d -m 0700 -o 0 -g 0 {q(path)} && "
            f"if [ -d {SKEL} ]; then cp -RPT {SKEL} {q(path)}; fi && "
            f"find {q(path)} -mindepth 1 -exec chown -h {int(uid)}:{int(gid)} {{}} + && chown {int(uid)}:{int(gid)} {q(path)}; fi")


@operation()
def homes(base: str, users: list[User], groups: list[Group]):
    """BASE/NAME for every user that has none (an existing one is never changed; none is ever deleted)."""
    there = set(host.get_fact(HomeDirs, base=base) or [])
    missing = [u for u in users if u.name not in there]
    if not missing:
        host.noop(f"homes in place under {base}: {len(users)}")
        return
    gids = {g.name: g.gid for g in groups}
    made = [(u, posixpath.join(base, u.name), gids.get(u.group or u.name, u.uid)) for u in missing]
    annotate(disruption="none", diff="".join(f"+ home {path} (0700 {u.uid}:{gid}, from {SKEL})\n"
                                             for u, path, gid in made))
    for u, path, gid in made:
        yield sh(home_script(path, u.uid, gid))


def home_base(cluster, node) -> str | None:
    """Where `node` makes homes: the maker's directory on the maker (spec/shared.py), identity.homes on
    every node when homes are local, None elsewhere."""
    maker = home_maker(cluster)
    if maker is None:
        return cluster.spec.identity.homes
    return maker[1] if maker[0].name == node.name else None


def _key_want(names: set[str]) -> Want:
    paths = tuple(sorted(key_file(n) for n in names))
    register_for_run(Want(paths=paths))  # before any snapshot is read: deploys are all prepared first
    return Want(paths=WANT.paths + paths, services=WANT.services, packages=WANT.packages)


@deploy("users")
def users() -> None:
    node, cluster = host.data.corral_node, host.data.corral_cluster
    spec = cluster.spec
    current = host.get_fact(LocalAccounts) or Accounts()
    if not (spec.users or spec.groups or current.managed):
        return
    directory = None
    if spec.users or spec.groups:  # each spec name and number, as the node resolves it (SSSD included)
        found = host.get_fact(AccountsByKey,
                              users=[*(u.name for u in spec.users), *(u.uid for u in spec.users)] or ["root"],
                              groups=[*(g.name for g in spec.groups), *(g.gid for g in spec.groups),
                                      *(u.uid for u in spec.users if u.group is None)] or ["root"])
        directory = not_local(found or Accounts(), current)
    accounts(name="local users and groups", users=spec.users, groups=spec.groups, homes=spec.identity.homes,
             node=node.name, current=current, directory=directory)
    names = {u.name for u in spec.users}
    # keys only where users log in (spec/access.py): on the controller, accounting or NFS node a user's
    # key would be a shell next to slurmctld's state, the database or every home
    keyed = [u for u in spec.users if u.ssh_keys] if users_log_in(cluster, node) else []
    stale = sorted((names - {u.name for u in keyed}) | (set(current.managed) - names))
    want = _key_want(names | set(current.managed))
    if keyed:
        operations.directory(name=KEYS_DIR, path=KEYS_DIR, want=want)
    for u in keyed:
        operations.managed_file(name=f"SSH keys of {u.name}", path=key_file(u.name), content=keys_text(u),
                                want=want)
    if stale:
        absent(name="SSH keys of removed or keyless users, or of a node users do not log in to",
               paths=[key_file(n) for n in stale], want=want,
               what="SSH key files of removed or keyless users, or of a node users do not log in to")
    sshd_dropin(name="sshd reads /etc/ssh/authorized_keys/%u", content=DROPIN_TEXT, want=WANT)
    base = home_base(cluster, node)
    if base is not None and spec.users:
        homes(name=f"homes under {base}", base=base, users=spec.users, groups=spec.groups)
