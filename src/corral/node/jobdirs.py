"""Per-user job directories (stdlib only; imported by jobhooks.py on compute nodes, as root).

enroot's runtime, data and cache paths are per user (`/run/enroot/user-$(id -u)`) or per group
(`/var/lib/enroot/cache/group-$(id -g)`); the prolog makes each one for the job's user (0700, theirs)
or group (2770, root:group), the epilog removes the user's runtime and data directories once the
user has no other job on the node (the image cache stays).

The parents are made by root (0755). Nothing is created or changed through a symbolic link or under
a directory another user could write to without the sticky bit, and an existing directory owned by
someone else is never handed over: a user who plants a link in /tmp gains nothing.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess


class UnsafePath(Exception):
    pass


def expand(template: str, uid: int, gid: int) -> str:
    path = os.path.normpath(template.format(uid=uid, gid=gid))
    if not path.startswith("/") or path.count("/") < 2:
        raise UnsafePath(f"{path}: not a directory of its own")
    return path


def _check_parent(path: str, st: os.stat_result) -> None:
    if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode):
        raise UnsafePath(f"{path}: not a plain directory")
    if st.st_uid != 0:
        raise UnsafePath(f"{path}: owned by uid {st.st_uid}, not root")
    if st.st_mode & 0o002 and not st.st_mode & stat.S_ISVTX:
        raise UnsafePath(f"{path}: writable by everyone without the sticky bit")


def make_user_dir(path: str, uid: int, gid: int, shared: bool = False) -> bool:
    """Create `path` for the user (True), or accept it as theirs already (False); UnsafePath else.
    `shared`: the group's directory instead (root-owned, group `gid`, 2770: the group's members share it)."""
    parts = path.strip("/").split("/")
    current = ""
    for name in parts[:-1]:
        current += "/" + name
        try:
            st = os.lstat(current)
        except FileNotFoundError:
            os.mkdir(current, 0o755)
            os.chown(current, 0, 0, follow_symlinks=False)
            st = os.lstat(current)
        _check_parent(current, st)
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        st = os.lstat(path)
        owner_ok = (st.st_uid, st.st_gid) == (0, gid) if shared else st.st_uid == uid
        if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode) or not owner_ok:
            who = f"root:{gid}" if shared else f"uid {uid}"
            raise UnsafePath(f"{path}: exists and is not a directory of {who}") from None
        return False
    os.chown(path, 0 if shared else uid, gid, follow_symlinks=False)
    if shared:
        os.chmod(path, 0o2770)
    return True


def remove_user_dir(path: str, uid: int) -> bool:
    """Remove the user's directory (never through a link, never another user's)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return False
    if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode) or st.st_uid != uid:
        raise UnsafePath(f"{path}: not a directory of uid {uid}; left alone")
    shutil.rmtree(path)
    return True


def other_jobs(node: str, uid: int, job: str) -> list[str] | None:
    """The user's other jobs on this node (None: Slurm could not tell, so keep everything)."""
    try:
        out = subprocess.run(["squeue", "-h", "-o", "%A", "-w", node, "-u", str(uid)], capture_output=True,
                             text=True, timeout=15)
    except (OSError, subprocess.SubprocessError):
        return None
    if out.returncode != 0:
        return None
    return [j for j in out.stdout.split() if j != job]


def prolog(dirs: list[dict], uid: int, gid: int) -> list[str]:
    errors = []
    for d in dirs:
        try:
            make_user_dir(expand(d["path"], uid, gid), uid, gid, bool(d.get("shared")))
        except (OSError, UnsafePath) as e:
            errors.append(str(e))
    return errors


def epilog(dirs: list[dict], uid: int, gid: int, node: str, job: str) -> list[str]:
    cleaned = [d for d in dirs if d.get("clean")]
    if not cleaned:
        return []
    others = other_jobs(node, uid, job)
    if others is None:
        return ["squeue failed: the user's directories are kept"]
    if others:
        return []
    errors = []
    for d in cleaned:
        try:
            remove_user_dir(expand(d["path"], uid, gid), uid)
        except (OSError, UnsafePath) as e:
            errors.append(str(e))
    return errors
