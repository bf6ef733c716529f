#!/usr/bin/python3
"""corral's Slurm Prolog/Epilog (stdlib only; runs on compute nodes as root, from slurmd).

    jobhooks.py prolog | epilog        (config: /etc/corral/jobhooks.json)

GPU job mapping for dcgm-exporter (`--hpc-job-mapping-dir`): one file per GPU index in
`gpu_job_map_dir`, holding the ids of the jobs using that GPU, one per line. The prolog adds the
job to the files of its GPUs; the epilog removes it and deletes files left empty.
The job's GPU indices come from SLURM_JOB_GPUS (set by slurmd for Prolog/Epilog), or else from
`scontrol show job -d` (the IDX list of this node).

Per-user directories (enroot's runtime, data and cache paths; see jobdirs.py), from `user_dirs`.

A hook never fails the job for a bookkeeping error (a failing Prolog would drain the node): it
logs to syslog and exits 0.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import subprocess
import sys
import syslog

CONFIG = "/etc/corral/jobhooks.json"


def expand_indices(text: str) -> list[int]:
    """'0,2-3' -> [0, 2, 3]; anything else is ignored."""
    out: list[int] = []
    for part in text.split(","):
        m = re.fullmatch(r"\s*(\d+)(?:-(\d+))?\s*", part)
        if m:
            lo, hi = int(m.group(1)), int(m.group(2) or m.group(1))
            out.extend(range(lo, hi + 1))
    return out


def indices_from_scontrol(text: str, node: str) -> list[int]:
    """GPU indices of `node` in `scontrol show job -d` output (lines `Nodes=gpu01 ... GRES=gpu:h100:2(IDX:0-1)`)."""
    for line in text.splitlines():
        m = re.search(r"\bNodes=(\S+)", line)
        if not m or "IDX:" not in line:
            continue
        if m.group(1) == node or node in _expand_hosts(m.group(1)):
            return sorted({i for idx in re.findall(r"gpu[^ ]*?\(IDX:([0-9,\-]+)\)", line)
                           for i in expand_indices(idx)})
    return []


def _expand_hosts(expr: str) -> list[str]:
    try:
        out = subprocess.run(["scontrol", "show", "hostnames", expr], capture_output=True, text=True, timeout=10)
        return out.stdout.split()
    except (OSError, subprocess.SubprocessError):
        return []


def job_gpus(env: dict[str, str]) -> list[int]:
    if env.get("SLURM_JOB_GPUS"):
        return expand_indices(env["SLURM_JOB_GPUS"])
    job, node = env.get("SLURM_JOB_ID"), env.get("SLURMD_NODENAME")
    if not job or not node:
        return []
    out = subprocess.run(["scontrol", "show", "job", "-d", job], capture_output=True, text=True, timeout=10)
    return indices_from_scontrol(out.stdout, node)


def _update(path: str, job: str, add: bool) -> None:
    """Add or remove `job` in one mapping file (caller holds the directory lock); rename into place."""
    try:
        with open(path) as f:
            jobs = [line.strip() for line in f if line.strip()]
    except FileNotFoundError:
        jobs = []
    jobs = [j for j in jobs if j != job] + ([job] if add else [])
    if jobs:
        tmp = f"{os.path.dirname(path)}.{os.path.basename(path)}.{os.getpid()}.tmp"  # beside the directory:
        with open(tmp, "w") as f:  # dcgm-exporter reads every file in it
            f.write("\n".join(jobs) + "\n")
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    elif os.path.exists(path):
        os.unlink(path)


def map_gpus(directory: str, job: str, gpus: list[int], add: bool) -> None:
    """Under one lock for the directory (jobs start and end concurrently on a node)."""
    os.makedirs(directory, mode=0o755, exist_ok=True)
    fd = os.open(directory.rstrip("/") + ".lock", os.O_CREAT | os.O_RDWR, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        for index in gpus:
            _update(os.path.join(directory, str(index)), job, add)
    finally:
        os.close(fd)


def user_dirs(hook: str, dirs: list[dict], env: dict[str, str]) -> list[str]:
    import pwd

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import jobdirs  # beside this file (on a node: /usr/local/lib/corral)
    uid = int(env["SLURM_JOB_UID"])
    gid = int(env["SLURM_JOB_GID"]) if env.get("SLURM_JOB_GID", "").isdigit() else pwd.getpwuid(uid).pw_gid
    if hook == "prolog":
        return jobdirs.prolog(dirs, uid, gid)
    return jobdirs.epilog(dirs, uid, gid, env.get("SLURMD_NODENAME", os.uname().nodename), env.get("SLURM_JOB_ID", ""))


def main(argv: list[str], env: dict[str, str]) -> int:
    if len(argv) != 1 or argv[0] not in ("prolog", "epilog"):
        print("usage: jobhooks.py prolog|epilog", file=sys.stderr)
        return 2
    try:
        with open(CONFIG) as f:
            config = json.load(f)
        directory, job = config.get("gpu_job_map_dir"), env.get("SLURM_JOB_ID", "")
        if directory and job.isdigit():
            map_gpus(directory, job, job_gpus(env), add=argv[0] == "prolog")
        if config.get("user_dirs") and env.get("SLURM_JOB_UID", "").isdigit():
            for problem in user_dirs(argv[0], config["user_dirs"], env):
                syslog.syslog(syslog.LOG_WARNING, f"corral {argv[0]}: job {job}: {problem}")
    except Exception as e:  # noqa: BLE001 - a hook must never drain the node for bookkeeping
        syslog.syslog(syslog.LOG_WARNING, f"corral {argv[0]}: job {env.get('SLURM_JOB_ID')}: {e}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:], dict(os.environ)))
