"""Who may use the cluster: `users:` and `groups:` (local accounts corral keeps identical on every node)
and `identity:` (where homes live, pam_slurm_adopt). deploy/users.py applies them; cross-field checks
(unique names and ids, known groups and accounts, homes on shared storage) are in spec/rules_users.py.
"""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import AfterValidator, Field

from corral.spec.models_base import Strict
from corral.spec.types import AbsPath, Gecos, SlurmName, SshPublicKey, UnixUser, _bad

LDAP_URI_RE = re.compile(r"(ldaps?)://([A-Za-z0-9.-]+|\[[0-9A-Fa-f:.]+\])(:[0-9]{1,5})?/?")
_RDN = r"[A-Za-z][A-Za-z0-9-]*=[A-Za-z0-9._-](?:[A-Za-z0-9 ._-]*[A-Za-z0-9._-])?"  # no blank at a value's ends
DN_RE = re.compile(rf"{_RDN}(,{_RDN})*")
LOCAL_FILE = r"^(~/|[^~\s\x00-\x1f\x7f-\x9f\"'\\])[^\s\x00-\x1f\x7f-\x9f\"'\\]*$"


def _ldap_uri(v: str) -> str:
    if not LDAP_URI_RE.fullmatch(v):
        raise _bad("not an LDAP URI: ldaps://HOST[:PORT] or ldap://HOST[:PORT] (no path, user or query)")
    return v


def _dn(v: str) -> str:
    if not DN_RE.fullmatch(v):
        raise _bad("not an LDAP DN like dc=example,dc=com (attr=value pairs joined by commas; no quotes, "
                   "backslashes, special characters or blanks at a value's ends)")
    return v


LdapUri = Annotated[str, AfterValidator(_ldap_uri)]
LdapDN = Annotated[str, AfterValidator(_dn)]

UID_MIN, UID_MAX = 1000, 59999  # Debian's range for user accounts (adduser.conf FIRST_UID..LAST_UID)
DIRECTORY_MIN_ID = 10000  # directory ids start here by default: 1000-9999 stay the spec's local users'
SYSTEM_IDS = (60000, 65535)  # Debian's ids for packages (slurm 64030) and systemd's dynamic users, nobody 65534
# groups whose members are root, or can become it, read its secrets or its disks: never handed out by
# corral (refused in groups:, users[].group(s)) and never read from the directory (sssd.conf filter_groups)
PRIVILEGED_GROUPS = ("root", "sudo", "wheel", "admin", "adm", "shadow", "disk", "kmem", "staff", "docker", "lxd",
                     "libvirt", "kvm", "systemd-journal")


class Group(Strict):
    """A local group with the same gid on every node."""

    name: UnixUser = Field(description="group name")
    gid: int = Field(ge=UID_MIN, le=UID_MAX, description="group id, the same on every node")


class User(Strict):
    """A local account with the same uid on every node, its home on shared storage and its Slurm accounts."""

    name: UnixUser = Field(description="login name")
    uid: int = Field(ge=UID_MIN, le=UID_MAX, description="user id, the same on every node")
    group: UnixUser | None = Field(default=None, description="primary group (one of `groups:`); unset: a "
                                                             "personal group named like the user, gid = uid")
    groups: list[UnixUser] = Field(default_factory=list, description="supplementary groups (of `groups:`)")
    shell: AbsPath = Field(default="/bin/bash", description="login shell")
    full_name: Gecos = Field(default="", description="the GECOS field (finger's name)")
    ssh_keys: list[SshPublicKey] = Field(default_factory=list,
                                         description="public keys that may log in as the user: written to "
                                                     "/etc/ssh/authorized_keys/NAME (root-owned) on login nodes "
                                                     "and on compute nodes under pam_slurm_adopt only")
    accounts: list[SlurmName] = Field(default_factory=list,
                                      description="Slurm accounts (of slurm.accounts) the user may charge; the "
                                                  "first is the DefaultAccount")
    default_qos: SlurmName | None = Field(default=None, description="the user's DefaultQOS in Slurm (of slurm.qos)")
    password: bool = Field(default=False, description="a random password corral makes once (STATE_DIR/secrets/"
                                                      "password-NAME, 0600) and sets on login nodes, hashed, for "
                                                      "logins through PAM such as the notebook hub's; unset: "
                                                      "the account has none (SSH keys only)")


class LdapSpec(Strict):
    """A directory service the nodes read users and groups from, through SSSD (sssd.conf, 0600)."""

    uri: list[LdapUri] = Field(min_length=1, description="ldap_uri of sssd.conf: ldaps:// (or ldap:// with "
                                                         "StartTLS), tried in order")
    base: LdapDN = Field(description="ldap_search_base, e.g. dc=example,dc=com")
    ca_cert: str | None = Field(default=None, pattern=LOCAL_FILE,
                                description="CA certificate (PEM) on the control host, relative to the spec "
                                            "file: copied to every node as ldap_tls_cacert; unset: the system's CAs")
    bind_dn: LdapDN | None = Field(default=None, description="ldap_default_bind_dn; unset: anonymous bind")
    bind_password_file: str | None = Field(
        default=None, pattern=LOCAL_FILE,
        description="file on the control host holding the bind password (with bind_dn); never in the spec")
    tls: bool = Field(default=True, description="require TLS (ldaps:// or StartTLS, certificate checked); false "
                                                "only for a test directory (warned about on every run)")
    min_id: int = Field(default=DIRECTORY_MIN_ID, ge=UID_MIN, le=2**32 - 2,
                        description="SSSD's min_id: directory users and groups with a smaller uid/gid are ignored "
                                    "(so the directory cannot claim sudo's gid 27, root's 0 or the spec users')")
    max_id: int = Field(default=UID_MAX, ge=0, le=2**32 - 2,
                        description="SSSD's max_id (0: no limit): above it directory ids are ignored; the default "
                                    "keeps Debian's system ids (60000-65535: slurm 64030, nobody 65534) out")
    login_groups: list[UnixUser] = Field(
        default_factory=list, description="directory groups whose members may log in on login nodes (and compute "
                                          "nodes, with a job there); empty: every directory user")
    admin_groups: list[UnixUser] = Field(
        default_factory=list, description="directory groups whose members may log in on every other node "
                                          "(controller, accounting, NFS server, monitoring); empty: none")


class IdentitySpec(Strict):
    """Where homes live and how users reach compute nodes."""

    homes: AbsPath = Field(default="/home", description="homes are HOMES/NAME, created once (0700, the user's) "
                                                        "on the shared storage that holds HOMES")
    ldap: LdapSpec | None = Field(default=None, description="read users and groups from LDAP with SSSD on every "
                                                            "node (with or instead of users:)")
    pam_slurm_adopt: bool = Field(default=True,
                                  description="compute nodes let a user SSH in only while they have a job there, "
                                              "and adopt the session into that job (root and the SSH user of "
                                              "corral are exempt; a node that is also a login node is left "
                                              "open); slurm.conf gets PrologFlags=Contain")
    adopt_exempt_users: list[UnixUser] = Field(
        default_factory=list, description="users (by name, never a group) who may SSH to a compute node without "
                                          "a job there, besides root and ssh.user: e.g. an admin or a "
                                          "monitoring agent")
