"""Smoke validation of a deployed Slurm cluster (used by `corral up`; `corral validate` builds on
it): every compute node registered and available, and one GPU job per compute node that sees
exactly the GPUs it asked for."""

from __future__ import annotations

import shlex
from collections import defaultdict

from corral.checks.smoke import CheckResult
from corral.engine.remote import run_on
from corral.spec.cluster import Cluster
from corral.spec.hosts import compress_names

BAD_STATES = ("down", "drain", "fail", "unknown", "not_responding", "future", "*")


def nodes_available(cluster: Cluster, ctl: str) -> CheckResult:
    proc = run_on(cluster, ctl, "sinfo -h -N -o '%N %T %G'", timeout=30)
    if proc.returncode != 0:
        return CheckResult("nodes available", False, f"sinfo failed on {ctl}: {proc.stderr.strip()}")
    seen = {}
    for line in proc.stdout.splitlines():
        name, state, gres = (line.split() + ["", ""])[:3]
        seen[name] = (state.lower(), gres)
    problems = []
    for n in cluster.with_role("compute"):
        state, gres = seen.get(n.name, ("missing", ""))
        if state == "missing" or any(b in state for b in BAD_STATES):
            problems.append(f"{n.name}: {state}")
        elif n.gpus and f"gpu:{n.gpus.model}:{n.gpus.count}" not in gres:
            problems.append(f"{n.name}: GRES {gres or '(none)'} != gpu:{n.gpus.model}:{n.gpus.count}")
    total = len(cluster.with_role("compute"))
    if problems:
        return CheckResult("nodes available", False, "; ".join(problems))
    return CheckResult("nodes available", True, f"{total}/{total} compute nodes available with their GRES")


def gpu_jobs(cluster: Cluster, ctl: str) -> list[CheckResult]:
    """One job step per compute node (grouped by GPU count): nvidia-smi sees exactly its GPUs."""
    groups: dict[int, list[str]] = defaultdict(list)
    for n in cluster.with_role("compute"):
        groups[n.gpu_count].append(n.name)
    results = []
    for count, names in sorted(groups.items()):
        if count == 0:
            continue
        script = "echo \"$(hostname) $CUDA_VISIBLE_DEVICES $(nvidia-smi -L | wc -l)\""
        cmd = (f"srun -N{len(names)} --ntasks-per-node=1 -w {shlex.quote(compress_names(names))} "
               f"--gres=gpu:{count} -t 5 bash -c {shlex.quote(script)}")
        proc = run_on(cluster, ctl, cmd, timeout=180)
        seen = {}
        for line in proc.stdout.splitlines():
            parts = line.split()
            if len(parts) == 3:
                seen[parts[0]] = (parts[1], int(parts[2]) if parts[2].isdigit() else -1)
        for name in names:
            visible, smi = seen.get(name, ("", -1))
            ok = len([v for v in visible.split(",") if v]) == count and smi == count
            msg = (f"{name}: job sees {smi} GPUs, CUDA_VISIBLE_DEVICES={visible}" if name in seen else
                   f"{name}: no output from the GPU job (rc={proc.returncode}: "
                   f"{proc.stderr.strip().splitlines()[-1:] or ''})")
            results.append(CheckResult("gpu job", ok, msg, name))
    return results


def validate_smoke(cluster: Cluster) -> list[CheckResult]:
    ctl = cluster.with_role("controller")[0].name
    available = nodes_available(cluster, ctl)
    return [available] + (gpu_jobs(cluster, ctl) if available.ok else [])
