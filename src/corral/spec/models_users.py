"""Who may use the cluster: `users:` and `groups:` (local accounts corral keeps identical on every node)
and `identity:` (where homes live, pam_slurm_adopt). deploy/users.py applies them; cross-field checks
(unique names and ids, known groups and accounts, homes on shared storage) are in spec/rules_users.py.
"""

from __future__ import annotations

from pydantic import Field

from corral.spec.models_base import Strict
from corral.spec.types import AbsPath, Gecos, SlurmName, SshPublicKey, UnixUser

UID_MIN, UID_MAX = 1000, 59999  # Debian's range for user accounts (adduser.conf FIRST_UID..LAST_UID)


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
                                                     "/etc/ssh/authorized_keys/NAME on every node (root-owned)")
    accounts: list[SlurmName] = Field(default_factory=list,
                                      description="Slurm accounts (of slurm.accounts) the user may charge; the "
                                                  "first is the DefaultAccount")
    default_qos: SlurmName | None = Field(default=None, description="the user's DefaultQOS in Slurm (of slurm.qos)")


class IdentitySpec(Strict):
    """Where homes live and how users reach compute nodes."""

    homes: AbsPath = Field(default="/home", description="homes are HOMES/NAME, created once (0700, the user's) "
                                                        "on the shared storage that holds HOMES")
    pam_slurm_adopt: bool = Field(default=True,
                                  description="compute nodes let a user SSH in only while they have a job there, "
                                              "and adopt the session into that job (root and the SSH user of "
                                              "corral are exempt; a node that is also a login node is left "
                                              "open); slurm.conf gets PrologFlags=Contain")
