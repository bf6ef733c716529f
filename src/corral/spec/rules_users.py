"""Cross-field checks of `users:`, `groups:` and `identity:` (pure, before any SSH). Collisions with
accounts that already exist on a node are found at plan time (deploy/users.py), located the same way."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import TYPE_CHECKING

from corral.errors import Problem
from corral.spec.models_users import PRIVILEGED_GROUPS
from corral.spec.shared import home_mount

if TYPE_CHECKING:
    from corral.spec.cluster import Cluster

Where = Callable[..., str]
RESERVED = {"root", "daemon", "bin", "sys", "sync", "nobody", "slurm", "munge", "mysql", "prometheus", "sshd",
            "systemd-network", "messagebus", "_apt"}


def _dups(items, key: str, label: str, where: Where, section: str) -> list[Problem]:
    problems = []
    for value, count in Counter(getattr(i, key) for i in items).items():
        if count > 1:
            i = max(i for i, item in enumerate(items) if getattr(item, key) == value)
            problems.append(Problem(where((section, i, key)), f"{label} used {count} times", value,
                                    f"give every {section[:-1]} its own {label}"))
    return problems


def check_users(cluster: Cluster, where: Where) -> list[Problem]:
    spec = cluster.spec
    users, groups = spec.users, spec.groups
    problems = (_dups(users, "name", "name", where, "users") + _dups(users, "uid", "uid", where, "users")
                + _dups(groups, "name", "name", where, "groups") + _dups(groups, "gid", "gid", where, "groups"))
    group_names = {g.name: g.gid for g in groups}
    accounts = {a.name for a in spec.slurm.accounts}
    qos = {q.name for q in spec.slurm.qos} | {"normal"}
    for i, u in enumerate(users):
        at = ("users", i)
        if u.name in RESERVED or u.name == spec.ssh.user:
            problems.append(Problem(where(at + ("name",)), "a system account or corral's SSH user", u.name,
                                    "choose another login name"))
        if u.group is None:
            if u.name in group_names and group_names[u.name] != u.uid:
                problems.append(Problem(where(at), f"the personal group {u.name} would have gid {u.uid}, but "
                                        f"groups: gives it gid {group_names[u.name]}", u.name,
                                        f"set group: {u.name} or make the gid {u.uid}"))
            clash = [g.name for g in groups if g.gid == u.uid and g.name != u.name]
            if clash:
                problems.append(Problem(where(at + ("uid",)), f"the personal group (gid {u.uid}) collides with "
                                        f"group {clash[0]}", u.uid, "set group: or choose another uid"))
        for key, names in (("group", [u.group] if u.group else []), ("groups", u.groups)):
            for g in names:
                if g in PRIVILEGED_GROUPS:
                    problems.append(Problem(where(at + (key,)), f"{g} is a privileged group (its members are "
                                            "root or can become it): corral does not hand it out", g,
                                            "give admin rights on the nodes themselves, outside corral"))
                elif g not in group_names and not (g == u.name and key == "groups"):
                    problems.append(Problem(where(at + (key,)), f"group {g!r} is not in groups:", g,
                                            "add it to groups: with a gid"))
        for a in u.accounts:
            if a not in accounts:
                problems.append(Problem(where(at + ("accounts",)), f"Slurm account {a!r} is not in slurm.accounts",
                                        a, "add it to slurm.accounts or correct the name"))
        if u.accounts and not cluster.with_role("accounting"):
            problems.append(Problem(where(at + ("accounts",)), "Slurm accounts need a node with the accounting "
                                    "role", u.accounts, "add the accounting role to a node"))
        if u.default_qos is not None and u.default_qos not in qos:
            problems.append(Problem(where(at + ("default_qos",)), f"QOS {u.default_qos!r} is not in slurm.qos",
                                    u.default_qos, "add it to slurm.qos or correct the name"))
        if u.default_qos is not None and not u.accounts:
            problems.append(Problem(where(at + ("default_qos",)), "a default QOS needs a Slurm account",
                                    u.default_qos, "add accounts: [ACCOUNT]"))
    for i, g in enumerate(groups):
        if g.name in PRIVILEGED_GROUPS:
            problems.append(Problem(where(("groups", i, "name")), "a privileged group (its members are root or can "
                                    "become it): corral does not make or fill it", g.name, "choose another name"))
        elif g.name in RESERVED:
            problems.append(Problem(where(("groups", i, "name")), "a system group", g.name, "choose another name"))
    for i, name in enumerate(spec.identity.adopt_exempt_users):
        if name == "root":  # ssh.user may be listed: the way to switch ssh.user (docs/security.md)
            problems.append(Problem(where(("identity", "adopt_exempt_users", i)), "exempt already", name,
                                    "remove it (root always is)"))
    homes = spec.identity.homes
    if users and home_mount(cluster) is None and spec.storage.mounts:
        problems.append(Problem(where(("identity", "homes")), "homes are on no shared mount of storage.mounts",
                                homes, "mount shared storage at (or above) this path, or set identity.homes"))
    return problems


def users_warnings(cluster: Cluster) -> list[str]:
    spec = cluster.spec
    if spec.users and home_mount(cluster) is None:
        return [f"identity.homes {spec.identity.homes} is on no shared mount: each node gets its own home "
                "directories, and job output written there stays on the node that ran the job"]
    return []
