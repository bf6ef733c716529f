"""Clean job environments, the epilog's part (stdlib only; imported by jobhooks.py on compute nodes, as
root, when `slurm.clean_jobs` is on; the private /tmp and /dev/shm are Slurm's job_container/tmpfs).

Leftovers: when the job's user has no other job on this node (squeue; a failing squeue keeps
everything), their processes here that are in no other Slurm job's cgroup get SIGTERM, then SIGKILL
after a grace period. Never uid 0 or a system account (uid < 1000), and never on a node that is also a
login node (`end_leftovers` false: users work there without a job).

GPUs: after the job (and its user's leftovers) are gone, the job's GPUs (SLURM_JOB_GPUS, bounded by the
caller) must hold no compute process (`nvidia-smi --query-compute-apps`). Each one still there is attributed
to its uid and cgroup first: a user's process in no Slurm job (one cron or at started, or one that left its
job) is ended, and said with its pid and uid; it never drains the node, so a user cannot keep nodes drained
after others' jobs (security review 3, N7). What is still there after that (root's, a system account's,
another job's, one /proc does not show) drains the node with a reason anyone reads in `scontrol show node` /
`sinfo -R`:
`corral: GPU processes left after job N: GPU i pid p, ...` (ids only, never a process name, which a user
chooses). corral-health leaves this drain to an admin (node/health_slurm.py ROLLOUT_PREFIX).

Every command is bounded (timeouts); nothing here fails the job: problems are returned for syslog.
"""

from __future__ import annotations

import os
import re
import select
import signal
import subprocess
import time

UID_MIN = 1000                      # below: root and system accounts, never signalled
SYSTEM_IDS = range(60000, 65536)    # Debian's ids for packages and systemd's dynamic users, nobody: never signalled
GRACE_S = 5                         # SIGTERM -> SIGKILL
SMI = "nvidia-smi"
REASON_PREFIX = "corral: GPU processes left after job"
MAX_REASON = 200
_JOB_CGROUP = re.compile(r"/job_(\d+)(?:/|$)")
_NODE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


def parse_compute_apps(text: str) -> list[tuple[int, str]]:
    """`nvidia-smi --query-compute-apps=pid,gpu_uuid --format=csv,noheader` -> [(pid, gpu uuid)]; lines
    not understood are skipped."""
    out = []
    for line in text.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) >= 2 and parts[0].isdigit() and re.fullmatch(r"(GPU|MIG)-[A-Za-z0-9/-]{1,80}", parts[1]):
            out.append((int(parts[0]), parts[1]))
    return out


def parse_gpu_uuids(text: str) -> dict[str, int]:
    """`nvidia-smi --query-gpu=index,uuid --format=csv,noheader` -> {uuid: index}."""
    out = {}
    for line in text.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) == 2 and parts[0].isdigit():
            out[parts[1]] = int(parts[0])
    return out


def stuck_on(apps: list[tuple[int, str]], uuids: dict[str, int], gpus: list[int]) -> dict[int, list[int]]:
    """GPU index -> pids of the compute processes on the job's GPUs."""
    out: dict[int, list[int]] = {}
    for pid, uuid in apps:
        index = uuids.get(uuid)
        if index is not None and index in gpus:
            out.setdefault(index, []).append(pid)
    return out


def drain_reason(job: str, stuck: dict[int, list[int]]) -> str:
    held = "; ".join(f"GPU {i} pid {','.join(map(str, sorted(p)))}" for i, p in sorted(stuck.items()))
    text = f"{REASON_PREFIX} {job}: {held}; an admin checks the node, then resumes it"
    return text if len(text) <= MAX_REASON else text[:MAX_REASON - 3] + "..."


def _status_uid(status: str) -> int | None:
    m = re.search(r"^Uid:\s+(\d+)", status, re.M)
    return int(m.group(1)) if m else None


def leftovers(uid: int, job: str, proc: str = "/proc") -> list[int]:
    """The pids of `uid`'s processes (real uid) in no Slurm job's cgroup but `job`'s own."""
    out = []
    for name in os.listdir(proc):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            with open(f"{proc}/{name}/status") as f:
                if _status_uid(f.read()) != uid:
                    continue
            with open(f"{proc}/{name}/cgroup") as f:
                jobs = set(_JOB_CGROUP.findall(f.read()))
        except OSError:  # gone meanwhile
            continue
        if jobs <= {job}:
            out.append(int(name))
    return sorted(out)


def _pidfd(pid: int, uid: int | None) -> int | None:
    """A pidfd of `pid` while it is still `uid`'s (checked after the pidfd is open: a pid reused since the listing
    is another process, never signalled); None when it is gone or another's."""
    try:
        fd = os.pidfd_open(pid)
    except OSError:  # gone (ESRCH)
        return None
    try:
        with open(f"/proc/{pid}/status") as f:
            if uid is not None and _status_uid(f.read()) != uid:
                os.close(fd)
                return None
    except OSError:
        os.close(fd)
        return None
    return fd


def _exited(fd: int) -> bool:
    """A pidfd reads as ready once its process has ended (a zombie included: its parent reaps it)."""
    return bool(select.select([fd], [], [], 0)[0])


def off_job(pid: int, proc: str = "/proc") -> int | None:
    """The uid of `pid` when it is a user's process in no Slurm job's cgroup (an entry of cron's or at's, or one
    that left its job); None for root, a system account, a job's process, or a pid /proc does not show."""
    try:
        with open(f"{proc}/{pid}/status") as f:
            uid = _status_uid(f.read())
        with open(f"{proc}/{pid}/cgroup") as f:
            jobs = _JOB_CGROUP.findall(f.read())
    except OSError:
        return None
    if uid is None or uid < UID_MIN or uid in SYSTEM_IDS or jobs:
        return None
    return uid


def end_processes(pids: list[int], grace_s: float = GRACE_S, sleep=time.sleep, clock=time.monotonic,
                  uid: int | None = None) -> list[int]:
    """SIGTERM each, SIGKILL those still there after `grace_s`; the pids that had to be killed. Signals go through
    pidfds opened before the first one (and each checked to still be `uid`'s): a pid the system reuses during the
    grace is never hit (security review 3, N15)."""
    fds = {p: fd for p in pids if (fd := _pidfd(p, uid)) is not None}
    try:
        for fd in fds.values():
            try:
                signal.pidfd_send_signal(fd, signal.SIGTERM)
            except ProcessLookupError:
                pass
        deadline = clock() + grace_s
        left = [p for p, fd in fds.items() if not _exited(fd)]
        while left and clock() < deadline:
            sleep(0.2)
            left = [p for p in left if not _exited(fds[p])]
        for p in left:
            try:
                signal.pidfd_send_signal(fds[p], signal.SIGKILL)
            except ProcessLookupError:
                pass
        return left
    finally:
        for fd in fds.values():
            os.close(fd)


def _run(run, argv: list[str], timeout: int) -> str | None:
    env = {k: v for k, v in os.environ.items() if k != "CUDA_VISIBLE_DEVICES"}  # every GPU of the node
    try:
        out = run(argv, capture_output=True, text=True, timeout=timeout, env=env)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout if out.returncode == 0 else None


def gpu_processes(gpus: list[int], run=subprocess.run, settle_s: float = 10, sleep=time.sleep,
                  clock=time.monotonic) -> dict[int, list[int]] | None:
    """GPU index -> pids still on the job's GPUs after up to `settle_s` (contexts take a moment to go);
    None: nvidia-smi could not tell."""
    deadline = clock() + settle_s
    while True:
        uuids = _run(run, [SMI, "--query-gpu=index,uuid", "--format=csv,noheader"], 10)
        apps = _run(run, [SMI, "--query-compute-apps=pid,gpu_uuid", "--format=csv,noheader"], 10)
        if uuids is None or apps is None:
            return None
        stuck = stuck_on(parse_compute_apps(apps), parse_gpu_uuids(uuids), gpus)
        if not stuck or clock() >= deadline:
            return stuck
        sleep(1)


def epilog(config: dict, env: dict[str, str], gpus: list[int], other_jobs, run=subprocess.run) -> list[str]:
    """The epilog's clean-up for the job in `env`; `other_jobs(node, uid, job)` -> the user's other jobs
    on the node (None: unknown). Returns what to log."""
    said: list[str] = []
    job, node = env.get("SLURM_JOB_ID", ""), env.get("SLURMD_NODENAME", os.uname().nodename)
    uid = int(env["SLURM_JOB_UID"]) if env.get("SLURM_JOB_UID", "").isdigit() else None
    if config.get("end_leftovers") and uid is not None and uid >= UID_MIN:
        others = other_jobs(node, uid, job)
        if others is None:
            said.append("squeue failed: the user's processes here are left alone")
        elif not others:
            pids = leftovers(uid, job)
            if pids:
                killed = end_processes(pids, uid=uid)
                said.append(f"ended {len(pids)} leftover process(es) of uid {uid} (SIGKILL: {len(killed)})")
    if gpus and os.path.exists("/dev/nvidiactl"):
        settle = float(config.get("gpu_settle_s", 10))
        stuck = gpu_processes(gpus, run, settle)
        strays = {pid: u for pids in (stuck or {}).values() for pid in pids if (u := off_job(pid)) is not None}
        if strays:  # ended, not drained for: a user outside every job would keep the node drained
            for owner in sorted(set(strays.values())):
                end_processes(sorted(p for p, u in strays.items() if u == owner), uid=owner)
            said.append("ended GPU process(es) outside any job: " + ", ".join(
                f"pid {p} uid {u}" for p, u in sorted(strays.items())))
            stuck = gpu_processes(gpus, run, settle)
        if stuck is None:
            said.append("nvidia-smi failed: the GPUs' processes were not checked")
        elif stuck and _NODE.fullmatch(node):
            reason = drain_reason(job, stuck)
            try:
                done = run(["scontrol", "update", f"NodeName={node}", "State=DRAIN", f"Reason={reason}"],
                           capture_output=True, text=True, timeout=15)
                ok, why = done.returncode == 0, done.stderr.strip()[:100]
            except (OSError, subprocess.SubprocessError) as e:
                ok, why = False, str(e)[:100]
            said.append(f"drained {node}: {reason}" if ok else f"could not drain {node} ({why}): {reason}")
    return said
