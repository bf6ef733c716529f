#!/usr/bin/python3
"""corral's Slurm Prolog/Epilog (stdlib only; runs on compute nodes as root, from slurmd).

    jobhooks.py prolog | epilog        (config: /etc/corral/jobhooks.json)

GPU job mapping for dcgm-exporter (`--hpc-job-mapping-dir`): one file per GPU index in
`gpu_job_map_dir`, holding the ids of the jobs using that GPU, one per line. The prolog adds the
job to the files of its GPUs; the epilog removes it and deletes files left empty. Files are written
only inside that directory, through a descriptor, after checking it is root's alone (not a link), and
`<dir>.lock` is never opened through a link: a user who can write beside them gets a logged refusal at
worst, never a root write elsewhere.
The job's GPU indices come only from SLURM_JOB_GPUS, which slurmd sets for Prolog/Epilog from the
allocation; a job without it has no GPU here. Never from `scontrol show job` text: it carries the user's
JobName, which could name any GPUs and any number of them. Indices are bounded by the node's GPUs
(`gpu_count` in the config, the GRES corral's gres.conf gives it; else its /dev/nvidiaN files).

Per-user directories (enroot's runtime, data and cache paths; see jobdirs.py), from `user_dirs`.
Clean jobs (`clean_jobs`, slurm.clean_jobs): the epilog ends a user's leftover processes after their last
job on the node and drains a node whose GPUs still hold processes (jobclean.py).

A hook never fails the job for a bookkeeping error (a failing Prolog would drain the node): it
logs to syslog and exits 0.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import re
import stat
import sys
import syslog

CONFIG = "/etc/corral/jobhooks.json"


def expand_indices(text: str, limit: int) -> tuple[list[int], list[str]]:
    """'0,2-3' -> ([0, 2, 3], []): the indices below `limit`, and the parts naming others (never expanded
    past `limit`, so no text can make a long list)."""
    out: list[int] = []
    bad: list[str] = []
    for part in text.split(","):
        m = re.fullmatch(r"\s*(\d{1,9})(?:-(\d{1,9}))?\s*", part)
        if not m:
            if part.strip():
                bad.append(part.strip()[:20])
            continue
        lo, hi = int(m.group(1)), int(m.group(2) or m.group(1))
        out.extend(i for i in range(lo, min(hi, limit - 1) + 1) if i not in out)
        if hi >= limit or lo > hi:
            bad.append(part.strip())
    return out, bad


def node_gpu_count(config: dict, dev_dir: str = "/dev") -> int:
    """GPUs Slurm can give a job here: the config's `gpu_count`, else this node's /dev/nvidiaN files."""
    count = config.get("gpu_count")
    if isinstance(count, int) and not isinstance(count, bool) and count >= 0:
        return count
    try:
        return sum(1 for n in os.listdir(dev_dir) if re.fullmatch(r"nvidia\d+", n))
    except OSError:
        return 0


def job_gpus(env: dict[str, str], limit: int) -> tuple[list[int], list[str]]:
    """The job's GPUs on this node from slurmd's SLURM_JOB_GPUS -> (indices, parts refused)."""
    return expand_indices(env.get("SLURM_JOB_GPUS", ""), limit)


class Refused(Exception):
    """A map directory or lock that is not root's alone (a user could have planted it): left alone."""


def _open_dir(directory: str) -> int:
    """The map directory, opened without following a link; it must be root's and writable by root only."""
    with contextlib.suppress(FileExistsError):  # a dangling link: refused below
        os.makedirs(directory, mode=0o755, exist_ok=True)
    try:
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as e:
        raise Refused(f"refusing {directory}: not a plain directory ({e.strerror})") from None
    st = os.fstat(fd)
    if st.st_uid != os.geteuid() or st.st_mode & 0o022:
        os.close(fd)
        raise Refused(f"refusing {directory}: owner uid {st.st_uid}, mode {stat.S_IMODE(st.st_mode):o}")
    return fd


def _open_lock(directory: str) -> int:
    """`<dir>.lock` beside the directory, never through a link; a plain file of root's, mode 0600."""
    path = directory + ".lock"
    try:
        fd = os.open(path, os.O_CREAT | os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK, 0o600)
    except OSError as e:
        if e.errno != errno.ELOOP:
            raise
        raise Refused(f"refusing {path}: a symbolic link") from None
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid() or st.st_nlink != 1:
        os.close(fd)
        raise Refused(f"refusing {path}: not a plain file of root's (uid {st.st_uid}, links {st.st_nlink})")
    return fd


def _read(dfd: int, name: str) -> list[str]:
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK, dir_fd=dfd)
    except FileNotFoundError:
        return []
    with os.fdopen(fd) as f:
        return [line.strip() for line in f if line.strip()] if stat.S_ISREG(os.fstat(fd).st_mode) else []


def _update(dfd: int, name: str, job: str, add: bool) -> None:
    """Add or remove `job` in one mapping file of the directory `dfd` (caller holds the lock).

    The temp file is made inside the checked directory (O_EXCL, O_NOFOLLOW, its final mode) and renamed
    into place: nothing is created where a user can write. dcgm-exporter skips names that are no GPU index."""
    jobs = [j for j in _read(dfd, name) if j != job] + ([job] if add else [])
    if not jobs:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(name, dir_fd=dfd)
        return
    tmp = f".{name}.{os.getpid()}.tmp"
    with contextlib.suppress(FileNotFoundError):
        os.unlink(tmp, dir_fd=dfd)  # a crashed hook's (only root writes here); a link is removed, not followed
    fd = os.open(tmp, os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644, dir_fd=dfd)
    try:
        with os.fdopen(fd, "w") as f:
            os.fchmod(f.fileno(), 0o644)  # whatever the umask
            f.write("\n".join(jobs) + "\n")
        os.replace(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=dfd)
        raise


def map_gpus(directory: str, job: str, gpus: list[int], add: bool) -> None:
    """Under one lock for the directory (jobs start and end concurrently on a node). Raises Refused when
    the directory or its lock is a link or not root's (main logs it; the job goes on)."""
    directory = directory.rstrip("/")  # "link/" would follow the link despite O_NOFOLLOW
    dfd = _open_dir(directory)
    try:
        lock = _open_lock(directory)
        try:
            fcntl.flock(lock, fcntl.LOCK_EX)
            for index in gpus:
                _update(dfd, str(index), job, add)
        finally:
            os.close(lock)
    finally:
        os.close(dfd)


def user_dirs(hook: str, dirs: list[dict], env: dict[str, str]) -> list[str]:
    import pwd

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import jobdirs  # beside this file (on a node: /usr/local/lib/corral)
    uid = int(env["SLURM_JOB_UID"])
    gid = int(env["SLURM_JOB_GID"]) if env.get("SLURM_JOB_GID", "").isdigit() else pwd.getpwuid(uid).pw_gid
    if hook == "prolog":
        return jobdirs.prolog(dirs, uid, gid)
    return jobdirs.epilog(dirs, uid, gid, env.get("SLURMD_NODENAME", os.uname().nodename), env.get("SLURM_JOB_ID", ""))


def clean_job(config: dict, env: dict[str, str]) -> list[str]:
    """slurm.clean_jobs: the user's leftovers ended after their last job here, the node drained when the
    job's GPUs still hold processes (jobclean.py, beside this file)."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import jobclean
    import jobdirs
    gpus, _ = job_gpus(env, node_gpu_count(config))
    return jobclean.epilog(config["clean_jobs"], env, gpus, jobdirs.other_jobs)


def main(argv: list[str], env: dict[str, str]) -> int:
    if len(argv) != 1 or argv[0] not in ("prolog", "epilog"):
        print("usage: jobhooks.py prolog|epilog", file=sys.stderr)
        return 2
    try:
        with open(CONFIG) as f:
            config = json.load(f)
        directory, job = config.get("gpu_job_map_dir"), env.get("SLURM_JOB_ID", "")
        if directory and job.isdigit():
            try:
                limit = node_gpu_count(config)
                gpus, refused = job_gpus(env, limit)
                if refused:
                    syslog.syslog(syslog.LOG_WARNING, f"corral {argv[0]}: job {job}: SLURM_JOB_GPUS "
                                  f"{', '.join(refused)} outside this node's {limit} GPUs: not mapped")
                map_gpus(directory, job, gpus, add=argv[0] == "prolog")
            except Exception as e:  # noqa: BLE001 - e.g. Refused: logged, and the user dirs still follow
                syslog.syslog(syslog.LOG_WARNING, f"corral {argv[0]}: job {job}: gpu job map: {e}")
        if config.get("user_dirs") and env.get("SLURM_JOB_UID", "").isdigit():
            for problem in user_dirs(argv[0], config["user_dirs"], env):
                syslog.syslog(syslog.LOG_WARNING, f"corral {argv[0]}: job {job}: {problem}")
        if config.get("clean_jobs") and argv[0] == "epilog":
            for line in clean_job(config, env):
                syslog.syslog(syslog.LOG_WARNING, f"corral epilog: job {job}: {line}")
    except Exception as e:  # noqa: BLE001 - a hook must never drain the node for bookkeeping
        syslog.syslog(syslog.LOG_WARNING, f"corral {argv[0]}: job {env.get('SLURM_JOB_ID')}: {e}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:], dict(os.environ)))
