"""Cross-field checks of `identity.ldap` (before any SSH): bind_dn and bind_password_file come together,
the CA certificate and the bind password file are readable files on the control host (relative to the
spec file), the CA file holds a PEM certificate. `tls: false` is allowed, for a test directory, and
warned about on every run. The files' contents are read again when a deploy needs them
(deploy/sssd.py); the password is never part of a message."""

from __future__ import annotations

import os
import stat
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from corral.errors import Problem
from corral.spec.models_users import PRIVILEGED_GROUPS, SYSTEM_IDS

if TYPE_CHECKING:
    from corral.spec.cluster import Cluster

Where = Callable[..., str]
MAX_FILE_BYTES = 1 << 20       # a CA bundle is a few hundred KiB at most; a password a line
PEM_MARK = b"-----BEGIN CERTIFICATE-----"


def ldap_file(cluster: Cluster, value: str) -> Path:
    """A file named in identity.ldap, on the control host: relative to the spec file's directory."""
    return (cluster.base_dir / Path(value).expanduser()).resolve()


def _file_problem(path: Path) -> str | None:
    """Why `path` cannot be used, or None."""
    try:
        st = path.stat()
    except FileNotFoundError:
        return "no such file"
    except OSError as exc:
        return f"cannot be read ({exc.strerror or exc})"
    if not stat.S_ISREG(st.st_mode):
        return "not a regular file"
    if not os.access(path, os.R_OK):
        return "not readable by this user"
    if st.st_size > MAX_FILE_BYTES:
        return f"larger than {MAX_FILE_BYTES} bytes"
    return None


def check_ldap(cluster: Cluster, where: Where) -> list[Problem]:
    ldap = cluster.spec.identity.ldap
    if ldap is None:
        return []
    at, problems = ("identity", "ldap"), []
    if (ldap.bind_dn is None) != (ldap.bind_password_file is None):
        have, missing = (("bind_dn", "bind_password_file") if ldap.bind_dn is not None
                         else ("bind_password_file", "bind_dn"))
        problems.append(Problem(where(at + (have,)), f"{have} without {missing}: they come together",
                                getattr(ldap, have), f"add {missing}, or remove {have} (anonymous bind)"))
    for uri, count in Counter(ldap.uri).items():
        if count > 1:
            i = max(i for i, u in enumerate(ldap.uri) if u == uri)
            problems.append(Problem(where(at + ("uri", i)), f"URI listed {count} times", uri,
                                    "list each directory server once"))
    if ldap.max_id and ldap.max_id < ldap.min_id:
        problems.append(Problem(where(at + ("max_id",)), f"below min_id ({ldap.min_id})", ldap.max_id,
                                "make max_id larger than min_id, or 0 for no limit"))
    for key in ("login_groups", "admin_groups"):
        for i, name in enumerate(getattr(ldap, key)):
            if name in PRIVILEGED_GROUPS:
                problems.append(Problem(where(at + (key, i)), "a privileged group: SSSD never reads it from the "
                                        "directory (filter_groups)", name, "name the directory's own group"))
    for key, what in (("ca_cert", "CA certificate"), ("bind_password_file", "bind password file")):
        value = getattr(ldap, key)
        if value is None:
            continue
        path = ldap_file(cluster, value)
        why = _file_problem(path)
        if why is None and key == "ca_cert":
            with open(path, "rb") as f:
                if PEM_MARK not in f.read(MAX_FILE_BYTES):
                    why = f"holds no PEM certificate ({PEM_MARK.decode()})"
        if why is not None:
            problems.append(Problem(where(at + (key,)), f"{what} {path}: {why}", value,
                                    f"put the {what} at {path} (a path relative to the spec file's "
                                    "directory) or correct the path"))
    return problems


def ldap_warnings(cluster: Cluster) -> list[str]:
    ldap = cluster.spec.identity.ldap
    if ldap is None:
        return []
    out = []
    if not ldap.tls:
        out.append("identity.ldap.tls: false: the nodes talk to the directory unencrypted and check no "
                   "certificate (user lookups can be forged, the bind and users' passwords travel in clear); "
                   "for a test directory only")
    if ldap.min_id <= SYSTEM_IDS[1] and (ldap.max_id == 0 or ldap.max_id >= SYSTEM_IDS[0]):
        out.append(f"identity.ldap: ids {ldap.min_id}-{ldap.max_id or 'unlimited'} include Debian's system ids "
                   f"{SYSTEM_IDS[0]}-{SYSTEM_IDS[1]} (slurm 64030, nobody 65534): a directory entry with one of "
                   "them takes its rights; corral checks the spec's and slurm's ids on the nodes")
    spec_ids = [u.uid for u in cluster.spec.users] + [g.gid for g in cluster.spec.groups]
    inside = sorted({i for i in spec_ids if i >= ldap.min_id and (ldap.max_id == 0 or i <= ldap.max_id)})
    if inside:
        out.append(f"identity.ldap: the spec's uids/gids {', '.join(map(str, inside[:5]))} are inside the "
                   f"directory's id range ({ldap.min_id}-{ldap.max_id or 'unlimited'}): plan refuses any that "
                   "the directory also holds; keep local ids below min_id")
    if ldap.bind_password_file is not None:
        path = ldap_file(cluster, ldap.bind_password_file)
        try:
            mode = path.stat().st_mode
        except OSError:
            mode = 0
        if stat.S_ISREG(mode) and mode & 0o077:
            out.append(f"identity.ldap.bind_password_file {path} can be read by other users of the control "
                       f"host (mode {stat.S_IMODE(mode):o}): chmod 600 it")
    return out
