"""DeepOps' accounts and SSH access -> cluster.yaml's `users:`, `groups:` and `identity:`.

`users` (the deepops_users role: username, uid, name, shell, ssh_key, group, groups, password, home) and
`groups_to_create` become local accounts with the same ids; corral adopts an account that exists with
the spec's name and uid and leaves its password alone, so DeepOps' users keep theirs. A password hash is
never copied (a secret; corral's users log in with their SSH keys), nor is a privileged group (sudo,
wheel, ...: corral hands out no admin rights). `slurm_restrict_node_access` is pam_slurm_adopt and
`slurm_allow_ssh_user` the users it lets in without a job (identity.adopt_exempt_users)."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field

from corral.importers.deepops_inventory import Var
from corral.importers.deepops_nvidia import invalid
from corral.importers.deepops_report import Report
from corral.importers.deepops_storage import item_where
from corral.importers.deepops_vars import truthy
from corral.spec.models_users import PRIVILEGED_GROUPS, Group, IdentitySpec, User
from corral.spec.shared import under

HOMES = "/home"  # identity.homes' default: corral makes HOMES/NAME


@dataclass
class AccessImport:
    get: Callable[[str], Var | None]
    report: Report
    slurm: bool  # the cluster.yaml carries Slurm's settings (pam_slurm_adopt is Slurm's)
    mounts: list[str]  # the mount points the import carried
    used: set[str] = field(default_factory=set)
    lines: list[str] = field(default_factory=list)  # top-level YAML

    def take(self, name: str) -> Var | None:
        var = self.get(name)
        if var is not None:
            self.used.add(name)
        return var

    def run(self) -> AccessImport:
        groups = self.groups()
        self.users(groups)
        if self.slurm:
            self.identity()
        return self

    def groups(self) -> set[str]:
        var, out = self.take("groups_to_create"), []
        for i, g in enumerate(var.value if var is not None and isinstance(var.value, list) else []):
            at, entry = item_where(var, i), {"name": g.get("name"), "gid": g.get("gid")} if isinstance(g, dict) else {}
            bad = invalid(Group, **entry) if entry else "not a {name, gid}"
            if not bad and entry["name"] in PRIVILEGED_GROUPS:
                bad = "a privileged group: corral hands out no admin rights"
            if bad:
                self.report.note(at, f"groups_to_create[{i}]", f"{g!r} not carried ({bad})")
            else:
                out.append({"name": str(entry["name"]), "gid": int(entry["gid"])})
        if out:
            self.lines += ["groups:"] + [f"  - {{name: {json.dumps(g['name'])}, gid: {g['gid']}}}" for g in out]
        return {g["name"] for g in out}

    def users(self, groups: set[str]) -> None:
        var = self.take("users")
        if var is None:
            return
        if not isinstance(var.value, list):
            return self.report.note(var.where, "users", "not a list of accounts: write users: by hand")
        if self.mounts and not any(under(HOMES, m) for m in self.mounts):
            return self.report.note(var.where, "users", f"not carried: corral makes homes in {HOMES}, which is on "
                                    "no imported mount; mount shared storage there and write users:")
        out = []
        for i, u in enumerate(var.value):
            at, subject = item_where(var, i), f"users[{i}]"
            if not isinstance(u, dict):
                self.report.note(at, subject, "not an account ({username, uid, ...}): write it in users:")
                continue
            user = {"name": u.get("username"), "uid": u.get("uid")}
            bad = invalid(User, **user)
            if bad:
                self.report.note(at, subject, f"{u.get('username')!r} not carried ({bad}): corral needs a name and a "
                                 "uid of 1000-59999, the same on every node")
                continue
            user |= self.fields(u, at, subject, groups)
            out.append(user)
        if out:
            self.lines += ["users:"] + ["  - {" + ", ".join(f"{k}: {json.dumps(v)}" for k, v in u.items()) + "}"
                                        for u in out]

    def fields(self, u: dict, at: str, subject: str, groups: set[str]) -> dict:
        """The account's other keys that carry; the rest noted."""
        out, name = {}, u["username"]
        for src, key in (("name", "full_name"), ("shell", "shell"), ("ssh_key", "ssh_keys")):
            value = u.get(src)
            value = [value] if key == "ssh_keys" and isinstance(value, str) else value
            if value is None:
                continue
            if invalid(User, name=name, uid=u["uid"], **{key: value}):
                self.report.note(at, f"{subject}.{src}", f"{value!r} not carried: set users[].{key} by hand")
            else:
                out[key] = value
        if "password" in u:
            self.report.change(at, f"{subject}.password", f"{name}'s password hash is not copied (a secret): corral "
                               "adopts the existing account and leaves its password as it is; new nodes get none "
                               "(users log in with users[].ssh_keys)", "users[].ssh_keys")
        group = u.get("group")
        if group is not None and str(group) in groups:
            out["group"] = str(group)
        elif group is not None:
            self.report.note(at, f"{subject}.group", f"{group!r} not carried: a primary group must be one of "
                             "groups: (with its gid); unset, corral gives the user a personal group (gid = uid)")
        extra = [str(g) for g in u.get("groups") or [] if str(g) in groups]
        left = [str(g) for g in u.get("groups") or [] if str(g) not in groups]
        if extra:
            out["groups"] = extra
        privileged = [g for g in left if g in PRIVILEGED_GROUPS]
        for names, why in ((privileged, "a privileged group (corral hands out no admin rights: give them on the "
                            "nodes)"), ([g for g in left if g not in privileged], "not in groups: (corral needs each "
                                        "group's gid: add it there)")):
            if names:
                self.report.note(at, f"{subject}.groups", f"{', '.join(names)} not carried: {why}")
        home = u.get("home")
        if home is not None and str(home).rstrip("/") != f"{HOMES}/{name}":
            self.report.note(at, f"{subject}.home", f"{home!r} not carried: corral's homes are identity.homes/NAME "
                             f"({HOMES}/{name})")
        return out

    def identity(self) -> None:
        restrict, allow = self.take("slurm_restrict_node_access"), self.take("slurm_allow_ssh_user")
        ident: dict = {}
        if restrict is not None and not truthy(restrict):
            ident["pam_slurm_adopt"] = False
            self.report.change(restrict.where, "slurm_restrict_node_access", "false: DeepOps still adopted SSH "
                               "sessions into jobs without refusing any; corral's pam_slurm_adopt: false leaves "
                               "compute nodes open and adopts nothing", "identity.pam_slurm_adopt")
        names = allow.value if allow is not None else []
        names = [names] if isinstance(names, str) and names and "{{" not in names else names
        if allow is not None and not (isinstance(names, list) and not invalid(IdentitySpec, adopt_exempt_users=names)):
            self.report.note(allow.where, "slurm_allow_ssh_user", f"{allow.value!r} is not a list of user names: set "
                             "identity.adopt_exempt_users by hand")
        elif names:
            ident["adopt_exempt_users"] = [str(n) for n in names]
        if ident:
            self.lines += ["identity:"] + [f"  {k}: {json.dumps(v)}" for k, v in ident.items()]
