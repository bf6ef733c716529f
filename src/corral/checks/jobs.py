"""validate's jobs on the controller: a GPU job per compute node and a multi-node job, only on the
nodes the reachability pass let through (checks/reach.py), and the cancel every validate run ends with.

Every job is named `corral-validate` and bounded: the job phase has one deadline (`Budget`); each
srun waits at most what is left of it for its allocation (`--immediate=<s>`: a job that cannot start
is withdrawn by srun itself), has a time limit (`-t`), and runs under `timeout` on the controller, so
a job that starts and hangs is ended there too, not only our SSH client. Whatever is left in the
queue is cancelled by name in validate's `finally` (`cancel_command`)."""

from __future__ import annotations

import math
import shlex
import subprocess
import time
from collections import defaultdict
from collections.abc import Callable, Iterable

from corral.checks.result import Check, error_text, summarize
from corral.errors import CorralError
from corral.spec.mig import spec_gres
from corral.spec.cluster import Cluster
from corral.spec.hosts import compress_names
from corral.spec.mig import layout

NAME = "corral-validate"   # every job validate submits, as root and as the spec user
GRACE_S = 15               # beyond a job's own bound: SSH, sudo, srun's teardown
CANCEL_S = 15
GPU_SCRIPT = "echo \"$(hostname) $SLURM_JOB_ID $CUDA_VISIBLE_DEVICES $(nvidia-smi -L | grep -c '^GPU ')\""
MULTI_SCRIPT = "echo $SLURM_JOB_ID $(hostname)"
TIMED_OUT = (124, 137)     # `timeout`: the command ran past its bound (TERM, then KILL)

monotonic = time.monotonic  # the clock (tests freeze it)
Run = Callable[..., subprocess.CompletedProcess]


class Budget:
    """The job phase's one deadline: each step waits at most what is left of it."""

    def __init__(self, seconds: int) -> None:
        self.seconds = int(seconds)
        self.deadline = monotonic() + self.seconds

    def left(self) -> int:
        return max(0, math.ceil(self.deadline - monotonic()))

    @property
    def spent(self) -> str:
        return f"not run: the job phase's bound ({self.seconds} s, --timeout) was reached"


def srun_command(args: Iterable[str], script: str, wait: int) -> str:
    """srun named corral-validate, waiting at most `wait` s to start, under `timeout` on the controller."""
    limit = max(1, math.ceil(int(wait) / 60))  # -t is in minutes
    return (f"timeout -k 5 {int(wait + 5)} srun -J {NAME} --immediate={int(wait)} -t {int(limit)} "
            f"{' '.join(shlex.quote(a) for a in args)} bash -c {shlex.quote(script)}")


def cancel_command(users: Iterable[str]) -> str:
    """Cancel every corral-validate job of these users (root's srun jobs, the spec user's batch job)."""
    return "; ".join(f"scancel --name={NAME} --user={shlex.quote(u)}" for u in users)


def not_done(what: str, proc: subprocess.CompletedProcess, wait: int) -> str:
    """Why a node is missing from a job's output: never started, started but hung, or failed."""
    err = proc.stderr or ""
    if "Requested nodes are busy" in err or ("queued and waiting" in err and "has been allocated" not in err):
        return f"job did not start within {wait} s (cancelled)"
    if proc.returncode in TIMED_OUT:
        return f"{what} started but did not finish within {wait} s (ended)"
    tail = (err.strip().splitlines() or ["no output"])[-1]
    return f"{what} failed (rc={proc.returncode}): {tail}"


def gpu_request(n) -> tuple[str, int, bool]:
    """(--gres request, devices the job must see, a MIG device?) for a node's GPU job: all its GPUs;
    with a MIG layout its whole GPUs by type, or one MIG device where every GPU is split."""
    want = spec_gres(n.gpus)
    if layout(n.gpus) is None:
        return f"gpu:{n.gpu_count}", n.gpu_count, False
    if want.get(n.gpus.model):
        return f"gpu:{n.gpus.model}:{want[n.gpus.model]}", want[n.gpus.model], False
    return f"gpu:{sorted(want)[0]}:1", 1, True


def gpu_jobs(cluster: Cluster, run: Run, ctl: str, skipped: dict[str, str], budget: Budget) -> Check:
    """One job step per compute node (grouped by GPU count) that must see exactly its GPUs."""
    groups: dict[tuple[str, int, bool], list[str]] = defaultdict(list)
    per_node: dict[str, tuple[str, str]] = {}
    for n in cluster.with_role("compute"):
        if n.gpu_count and n.name in skipped:
            per_node[n.name] = ("FAIL", f"not tested ({skipped[n.name]})")
        elif n.gpu_count:
            groups[gpu_request(n)].append(n.name)
    for (request, count, mig), names in sorted(groups.items()):
        wait = budget.left()
        if wait <= 0:
            per_node.update({name: ("FAIL", budget.spent) for name in names})
            continue
        args = [f"-N{len(names)}", "--ntasks-per-node=1", "-w", compress_names(names), f"--gres={request}"]
        try:
            proc = run(ctl, srun_command(args, GPU_SCRIPT, wait), timeout=wait + GRACE_S)
        except CorralError as exc:
            per_node.update({name: ("FAIL", f"GPU job: srun: {error_text(exc)}") for name in names})
            continue
        seen = {p[0]: p[1:] for p in (line.split() for line in proc.stdout.splitlines()) if len(p) == 4}
        for name in names:
            if name not in seen:
                per_node[name] = ("FAIL", not_done("GPU job", proc, wait))
                continue
            _job, visible, smi = seen[name]
            n_vis = len([v for v in visible.split(",") if v])
            ok = n_vis == count and (mig or smi == str(count))  # a MIG device: nvidia-smi shows its GPU
            per_node[name] = ("OK" if ok else "FAIL",
                              f"asked {count} GPUs: CUDA_VISIBLE_DEVICES={visible}, nvidia-smi sees {smi}")
    if not per_node:
        return Check("gpu job", "SKIPPED", "no compute node has GPUs")
    return summarize("gpu job", per_node, "every compute node ran a GPU job seeing exactly its GPUs")


def multi_node(cluster: Cluster, run: Run, ctl: str, skipped: dict[str, str],
               budget: Budget) -> tuple[Check, str | None]:
    """A job over two compute nodes (one if there is one), on nodes that passed the reachability pass."""
    compute = [n.name for n in cluster.with_role("compute")]
    ready = [name for name in compute if name not in skipped]
    n = min(2, len(compute))
    untested = "; ".join(f"{name}: not tested ({why})" for name, why in sorted(skipped.items()))
    if len(ready) < n:
        return Check("multi-node job", "FAIL", f"not run: {n} nodes needed, {len(ready)} passed the "
                                               f"reachability pass; {untested}"), None
    wait = budget.left()
    if wait <= 0:
        return Check("multi-node job", "FAIL", budget.spent), None
    cmd = srun_command([f"-N{n}", "-w", compress_names(ready[:n])], MULTI_SCRIPT, wait)
    try:
        proc = run(ctl, cmd, timeout=wait + GRACE_S)
    except CorralError as exc:
        return Check("multi-node job", "FAIL", f"srun: {error_text(exc)}"), None
    rows = [line.split() for line in proc.stdout.splitlines() if len(line.split()) == 2]
    hosts = {r[1] for r in rows}
    note = f"; {untested}" if untested else ""
    if proc.returncode == 0 and len(hosts) == n:
        return Check("multi-node job", "OK", f"{n} nodes: {', '.join(sorted(hosts))}{note}"), rows[0][0]
    missing = ", ".join(name for name in ready[:n] if name not in hosts)
    return Check("multi-node job", "FAIL", f"srun -N{n} on {compress_names(ready[:n])}: {missing}: "
                 f"{not_done('job', proc, wait)}{note}"), None
