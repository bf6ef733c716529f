"""`corral validate` (after deploy, Slurm): one verdict on "is this cluster fit for jobs?".

JSON: a superset of DeepOps' validate_slurm.py contract (ok, slurm_version, controller_reachable,
nodes_total, nodes_available, gpus_configured, gpu_job_ok, failures) plus `checks`.

Every command goes through one seam, `run(node, command, *, timeout, input=None)` -> CompletedProcess:
by default engine.remote.run_on over SSH; tests pass a runner answering with captured Slurm output.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import time
from collections import defaultdict
from collections.abc import Callable

from corral.checks.result import Check, Report, summarize
from corral.checks.user_job import user_job
from corral.checks.slurm_parse import available, gres_counts, parse_show_node, ping_up, slurm_version
from corral.engine.remote import run_on
from corral.errors import CorralError
from corral.parallel import pmap
from corral.render.mig import spec_gres
from corral.spec.cluster import Cluster
from corral.spec.hosts import compress_names
from corral.spec.mig import layout

Run = Callable[..., subprocess.CompletedProcess]  # run(node, command, *, timeout, input=None)


def remote(cluster: Cluster) -> Run:
    """The real runner: the command over SSH on the node (engine.remote.run_on)."""
    def run(node: str, command: str, **kw) -> subprocess.CompletedProcess:
        return run_on(cluster, node, command, **kw)
    return run


def _controller(run: Run, ctl: str, report: Report) -> bool:
    try:
        proc = run(ctl, "scontrol ping; scontrol version", timeout=30)
    except CorralError as exc:
        proc, err = None, str(exc)
    up = proc is not None and ping_up(proc.stdout)
    report.extra["controller_reachable"] = up
    report.extra["slurm_version"] = slurm_version(proc.stdout) if proc else None
    msg = f"slurmctld on {ctl} is up (Slurm {report.extra['slurm_version']})" if up else \
        f"slurmctld on {ctl} not reachable: {(proc.stdout + proc.stderr).strip()[-300:] if proc else err}"
    report.checks.append(Check("controller reachable", "OK" if up else "FAIL", msg))
    return up


def _nodes(cluster: Cluster, run: Run, ctl: str, report: Report) -> None:
    shown = parse_show_node(run(ctl, "scontrol show node -o", timeout=30).stdout)
    compute = cluster.with_role("compute")
    state, gres = {}, {}
    for n in compute:
        f = shown.get(n.name)
        if f is None:
            state[n.name] = ("FAIL", "not known to Slurm")
            gres[n.name] = ("FAIL", "not known to Slurm")
            continue
        ok = available(f)
        reason = f" ({f['Reason']})" if f.get("Reason") else ""
        state[n.name] = ("OK", f["State"]) if ok else ("FAIL", f"{f['State']}{reason}")
        want = spec_gres(n.gpus)  # whole GPUs, and MIG devices where the spec has a layout
        have = gres_counts(f.get("Gres", ""))
        gres[n.name] = ("OK", f.get("Gres") or "none") if have == want else \
            ("FAIL", f"GRES {f.get('Gres') or 'none'}, spec says " +
             (",".join(f"gpu:{t}:{c}" for t, c in want.items()) or "none"))
    report.extra["nodes_total"] = len(compute)
    report.extra["nodes_available"] = sum(1 for s, _ in state.values() if s == "OK")
    report.extra["gpus_configured"] = sum(sum(gres_counts(shown[n.name].get("Gres", "")).values())
                                          for n in compute if n.name in shown)
    report.checks.append(summarize("nodes available", state, f"{len(compute)}/{len(compute)} compute nodes available"))
    report.checks.append(summarize("gres", gres, "configured GRES equals the spec on every node"))


def gpu_request(n) -> tuple[str, int, bool]:
    """(--gres request, devices the job must see, a MIG device?) for a node's GPU job: all its GPUs;
    with a MIG layout its whole GPUs by type, or one MIG device where every GPU is split."""
    want = spec_gres(n.gpus)
    if layout(n.gpus) is None:
        return f"gpu:{n.gpu_count}", n.gpu_count, False
    if want.get(n.gpus.model):
        return f"gpu:{n.gpus.model}:{want[n.gpus.model]}", want[n.gpus.model], False
    return f"gpu:{sorted(want)[0]}:1", 1, True


def _gpu_jobs(cluster: Cluster, run: Run, ctl: str) -> tuple[Check, list[str]]:
    """One job step per compute node (grouped by GPU count) that must see exactly its GPUs."""
    groups: dict[tuple[str, int, bool], list[str]] = defaultdict(list)
    for n in cluster.with_role("compute"):
        if n.gpu_count:
            groups[gpu_request(n)].append(n.name)
    per_node, job_ids = {}, []
    script = "echo \"$(hostname) $SLURM_JOB_ID $CUDA_VISIBLE_DEVICES $(nvidia-smi -L | grep -c '^GPU ')\""
    for (request, count, mig), names in sorted(groups.items()):
        cmd = (f"srun -N{len(names)} --ntasks-per-node=1 -w {shlex.quote(compress_names(names))} "
               f"--gres={request} -t 5 bash -c {shlex.quote(script)}")
        proc = run(ctl, cmd, timeout=300)
        seen = {p[0]: p[1:] for p in (line.split() for line in proc.stdout.splitlines()) if len(p) == 4}
        for name in names:
            if name not in seen:
                tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
                per_node[name] = ("FAIL", f"GPU job failed (rc={proc.returncode}): {tail}")
                continue
            job, visible, smi = seen[name]
            job_ids.append(job)
            n_vis = len([v for v in visible.split(",") if v])
            ok = n_vis == count and (mig or smi == str(count))  # a MIG device: nvidia-smi shows its GPU
            per_node[name] = ("OK" if ok else "FAIL",
                              f"asked {count} GPUs: CUDA_VISIBLE_DEVICES={visible}, nvidia-smi sees {smi}")
    if not per_node:
        return Check("gpu job", "SKIPPED", "no compute node has GPUs"), job_ids
    return summarize("gpu job", per_node, "every compute node ran a GPU job seeing exactly its GPUs"), job_ids


def _multi_node(cluster: Cluster, run: Run, ctl: str) -> tuple[Check, str | None]:
    n = min(2, len(cluster.with_role("compute")))
    proc = run(ctl, f"srun -N{int(n)} -t 5 bash -c 'echo $SLURM_JOB_ID $(hostname)'", timeout=300)
    rows = [line.split() for line in proc.stdout.splitlines() if len(line.split()) == 2]
    hosts = {r[1] for r in rows}
    if proc.returncode == 0 and len(hosts) == n:
        return Check("multi-node job", "OK", f"{n} nodes: {', '.join(sorted(hosts))}"), rows[0][0]
    return Check("multi-node job", "FAIL", f"srun -N{n} failed (rc={proc.returncode}): "
                 f"{proc.stderr.strip()[-300:]}"), None


JOB_ID = re.compile(r"[0-9]+(?:_[0-9]+)?(?:\.[0-9]+)?")  # 123, an array task 123_4, a step 123.0


def job_id(text: str) -> str | None:
    """`text` (a job id read from a node's output) when it is a Slurm job id, else None."""
    return text if JOB_ID.fullmatch(text) else None


def _accounting(cluster: Cluster, ctl: str, job: str | None, run: Run | None = None) -> Check:
    run = run or remote(cluster)
    if not cluster.with_role("accounting"):
        return Check("job accounted", "SKIPPED", "no accounting node in the spec")
    if job is None:
        return Check("job accounted", "SKIPPED", "no job ran")
    if job_id(job) is None:
        return Check("job accounted", "FAIL", f"the job id the controller returned is not a Slurm job id "
                     f"(digits): {job[:60]!r}; not passed to sacct")
    for _ in range(30):
        out = run(ctl, f"sacct -n -X -P -j {shlex.quote(job)} -o JobID,State,Account",
                     timeout=30).stdout.strip()
        if "COMPLETED" in out:
            return Check("job accounted", "OK", f"job {job} recorded: {out}")
        time.sleep(0.5)
    return Check("job accounted", "FAIL", f"job {job} not recorded as COMPLETED by slurmdbd (sacct: {out or 'nothing'})")


def _munge(cluster: Cluster, run: Run, ctl: str) -> Check:
    cred = run(ctl, "munge -n", timeout=30).stdout

    def one(name: str) -> tuple[str, tuple[str, str]]:
        proc = run(name, "unmunge", input=cred, timeout=30)
        ok = proc.returncode == 0 and "STATUS:" in proc.stdout and "Success" in proc.stdout
        return name, ("OK", "decodes the controller's credential") if ok else \
            ("FAIL", f"unmunge failed: {(proc.stdout + proc.stderr).strip().splitlines()[:1]}")
    per_node = dict(pmap(one, [n.name for n in cluster.nodes]))
    return summarize("munge", per_node, "every node decodes the controller's munge credential")


def _real_gpu_checks(cluster: Cluster) -> list[Check]:
    if cluster.spec.virtual is not None:
        reason = "emulated GPUs (virtual cluster): no compute to measure"
        return [Check("gpu burn", "SKIPPED", reason), Check("nccl all-reduce", "SKIPPED", reason)]
    return [Check("gpu burn", "SKIPPED", "no burn tool deployed yet (NVIDIA stack component)"),
            Check("nccl all-reduce", "SKIPPED", "nccl-tests not installed")]


def validate(cluster: Cluster, *, jobs: bool = True, run: Run | None = None) -> Report:
    """`run`: how a command reaches a node (default: SSH, see remote())."""
    run = run or remote(cluster)
    ctl = cluster.with_role("controller")[0].name
    report = Report(extra={"slurm_version": None, "controller_reachable": False,
                           "nodes_total": len(cluster.with_role("compute")), "nodes_available": 0,
                           "gpus_configured": 0, "gpu_job_ok": None})
    if not _controller(run, ctl, report):
        return report
    _nodes(cluster, run, ctl, report)
    if jobs:
        gpu, _ = _gpu_jobs(cluster, run, ctl)
        report.extra["gpu_job_ok"] = gpu.status == "OK"
        multi, job = _multi_node(cluster, run, ctl)
        report.checks += [gpu, multi, _accounting(cluster, ctl, job, run), user_job(cluster, run)]
    else:
        report.checks.append(Check("jobs", "SKIPPED", "--skip-jobs: read-only run"))
    report.checks.append(_munge(cluster, run, ctl))
    report.checks += _real_gpu_checks(cluster)
    return report
