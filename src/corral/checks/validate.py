"""`corral validate` (after deploy, Slurm): one verdict on "is this cluster fit for jobs?".

JSON: a superset of DeepOps' validate_slurm.py contract (ok, slurm_version, controller_reachable,
nodes_total, nodes_available, gpus_configured, gpu_job_ok, failures) plus `acceptance` (the GPU
acceptance figures: dcgm_diag, gpu_tflops, nccl_busbw_gbps per node; checks/acceptance.py) and `checks`.

Every command goes through one seam, `run(node, command, *, timeout, input=None)` -> CompletedProcess:
by default engine.remote.run_on over SSH; tests pass a runner answering with captured Slurm output.

Always a verdict, bounded: the controller, then Slurm's view of the nodes, then a reachability pass
over the compute nodes (checks/reach.py, each ~10 s, in parallel); jobs (checks/jobs.py, user_job.py)
go only to the nodes that passed, within one `timeout_s` for the whole job phase. A CorralError
(a command timed out, a node unreachable) becomes a FAIL check naming the node and what failed; it
never leaves validate(). Every job is named corral-validate and whatever is left of them is
cancelled in a `finally` (KeyboardInterrupt included). Last, on real GPUs, the acceptance jobs
(checks/acceptance.py: DCGM diagnostics, gpu burn, NCCL all-reduce), each with a bound of its own.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import time
from collections.abc import Callable
from typing import Any

from corral.checks.acceptance import acceptance, figures
from corral.checks.ctld_restart import restart_check
from corral.checks.jobs import CANCEL_S, Budget, cancel_command, gpu_jobs, multi_node
from corral.checks.reach import reach
from corral.checks.notebook import notebook_check
from corral.checks.result import Check, Report, error_text, summarize
from corral.checks.slurm_parse import available, gres_counts, parse_ping, parse_show_node, slurm_version
from corral.checks.user_job import submitter, user_job
from corral.engine.remote import run_on, shared_connections
from corral.errors import CorralError
from corral.parallel import pmap
from corral.spec.mig import spec_gres
from corral.spec.cluster import Cluster

TIMEOUT_S = 60  # the job phase, all jobs together (`corral validate --timeout`)
Run = Callable[..., subprocess.CompletedProcess]  # run(node, command, *, timeout, input=None)


def remote(cluster: Cluster) -> Run:
    """The real runner: the command over SSH on the node (engine.remote.run_on)."""
    def run(node: str, command: str, **kw) -> subprocess.CompletedProcess:
        return run_on(cluster, node, command, **kw)
    return run


def _controller(cluster: Cluster, run: Run, report: Report) -> str | None:
    """`scontrol ping` on the primary controller's node (on the backup's when the primary's cannot be
    reached): that node, where the other commands run, or None when no slurmctld answers. With two
    controllers the check names the one answering (WARN: the backup, the primary being down), and a
    check "backup controller" says whether the backup stands by (WARN when it is down)."""
    names = [n.name for n in cluster.with_role("controller")]
    proc, err, ctl = None, "", names[0]
    for ctl in names:
        try:
            proc = run(ctl, "scontrol ping; scontrol version", timeout=30)
            break
        except CorralError as exc:
            err += ("; " if err else "") + (f"{ctl}: {exc}" if len(names) > 1 else str(exc))
    pings = parse_ping(proc.stdout) if proc is not None else []
    up = [(role, host) for role, host, ok in pings if ok]
    version = slurm_version(proc.stdout) if proc is not None else None
    report.extra["controller_reachable"], report.extra["slurm_version"] = bool(up), version
    if not up:
        detail = (proc.stdout + proc.stderr).strip()[-300:] if proc is not None else err
        report.checks.append(Check("controller reachable", "FAIL",
                                   f"slurmctld on {', '.join(names)} not reachable: {detail}"))
        return None
    if len(names) == 1:
        report.checks.append(Check("controller reachable", "OK", f"slurmctld on {names[0]} is up (Slurm {version})"))
        return ctl
    role, host = up[0]
    primary_down = role != "primary"
    report.checks.append(Check("controller reachable", "WARN" if primary_down else "OK",
                               f"slurmctld on {host} ({role}) answers (Slurm {version})"
                               + (f"; the primary {names[0]} is DOWN: the backup has taken over" if primary_down
                                  else "")))
    backups = [(h, ok) for r, h, ok in pings if r != "primary"]
    if not backups:
        check = Check("backup controller", "WARN", f"scontrol ping on {ctl} lists no backup controller: "
                      f"its slurm.conf names one SlurmctldHost (apply to {', '.join(names)})")
    elif all(ok for _, ok in backups):
        check = Check("backup controller", "OK", f"slurmctld on {backups[0][0]} (backup) is UP, standing by")
    else:
        check = Check("backup controller", "WARN", f"slurmctld on {backups[0][0]} (backup) is DOWN: no failover "
                      f"when {names[0]} fails (systemctl status slurmctld on {backups[0][0]})")
    report.checks.append(check)
    return ctl


def _nodes(cluster: Cluster, run: Run, ctl: str, report: Report) -> dict[str, dict[str, str]]:
    """Slurm's view of the compute nodes (state, GRES) from one `scontrol show node -o`."""
    try:
        shown = parse_show_node(run(ctl, "scontrol show node -o", timeout=30).stdout)
    except CorralError as exc:
        report.checks.append(Check("nodes available", "FAIL", f"scontrol show node: {error_text(exc)}"))
        return {}
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
    return shown


JOB_ID = re.compile(r"[0-9]+(?:_[0-9]+)?(?:\.[0-9]+)?")  # 123, an array task 123_4, a step 123.0


def job_id(text: str) -> str | None:
    """`text` (a job id read from a node's output) when it is a Slurm job id, else None."""
    return text if JOB_ID.fullmatch(text) else None


def _accounting(cluster: Cluster, ctl: str, job: str | None, run: Run | None = None,
                budget: Budget | None = None) -> Check:
    """The multi-node job in slurmdbd: sacct polled (~15 s) while the job phase has time left."""
    run = run or remote(cluster)
    budget = budget or Budget(TIMEOUT_S)
    if not cluster.with_role("accounting"):
        return Check("job accounted", "SKIPPED", "no accounting node in the spec")
    if job is None:
        return Check("job accounted", "SKIPPED", "no job ran")
    if job_id(job) is None:
        return Check("job accounted", "FAIL", f"the job id the controller returned is not a Slurm job id "
                     f"(digits): {job[:60]!r}; not passed to sacct")
    out = ""
    for _ in range(30):
        if budget.left() <= 0:
            break
        try:
            out = run(ctl, f"sacct -n -X -P -j {shlex.quote(job)} -o JobID,State,Account",
                      timeout=min(30, budget.left())).stdout.strip()
        except CorralError as exc:
            return Check("job accounted", "FAIL", f"sacct: {error_text(exc)}")
        if "COMPLETED" in out:
            return Check("job accounted", "OK", f"job {job} recorded: {out}")
        time.sleep(0.5)
    return Check("job accounted", "FAIL", f"job {job} not recorded as COMPLETED by slurmdbd (sacct: {out or 'nothing'})")


def _munge(cluster: Cluster, run: Run, ctl: str, unreachable: set[str]) -> Check:
    try:
        cred = run(ctl, "munge -n", timeout=30).stdout
    except CorralError as exc:
        return Check("munge", "FAIL", f"munge -n: {error_text(exc)}")

    def one(name: str) -> tuple[str, tuple[str, str]]:
        if name in unreachable:
            return name, ("FAIL", "not tested (unreachable)")
        try:
            proc = run(name, "unmunge", input=cred, timeout=30)
        except CorralError as exc:
            return name, ("FAIL", f"unmunge: {error_text(exc)}")
        ok = proc.returncode == 0 and "STATUS:" in proc.stdout and "Success" in proc.stdout
        return name, ("OK", "decodes the controller's credential") if ok else \
            ("FAIL", f"unmunge failed: {(proc.stdout + proc.stderr).strip().splitlines()[:1]}")
    per_node = dict(pmap(one, [n.name for n in cluster.nodes]))
    return summarize("munge", per_node, "every node decodes the controller's munge credential")


def _jobs(cluster: Cluster, run: Run, ctl: str, report: Report, skipped: dict[str, str],
          shown: dict, budget: Budget) -> None:
    """The GPU jobs, the multi-node job (then its accounting record), the user's job and the notebook (a
    server through the hub: checks/notebook.py) are independent:
    they run at once, each bounded by the one budget (Slurm places them; none asks for a whole node)."""
    compute = [n.name for n in cluster.with_role("compute")]
    blocked = None if len(skipped) < len(compute) else \
        "not run: no compute node passed the reachability pass"

    def multi_then_accounted() -> tuple[Check, Check]:
        multi, job = multi_node(cluster, run, ctl, skipped, budget)
        return multi, _accounting(cluster, ctl, job, run, budget)

    def users() -> Check:
        wait = budget.left()
        return user_job(cluster, run, wait=wait, exclude=[n for n in skipped if n in shown],
                        blocked=blocked or (budget.spent if wait <= 0 else None))

    def notebook() -> Check | None:
        return notebook_check(cluster, run, ctl, budget.left())

    outcomes = pmap(_outcome, [lambda: gpu_jobs(cluster, run, ctl, skipped, budget), multi_then_accounted, users,
                               notebook])
    for raised in [o for ok, o in outcomes if not ok]:
        raise raised  # e.g. Ctrl-C in a step: here, after the others, so validate's finally cancels every job
    gpu, (multi, accounted), user, book = (o for _, o in outcomes)
    report.extra["gpu_job_ok"] = gpu.status == "OK"
    report.checks += [gpu, multi, accounted, user, *([book] if book is not None else [])]


def _outcome(step: Callable) -> tuple[bool, Any]:
    """A step's result, or what it raised (BaseException too: a greenlet's KeyboardInterrupt would go
    to gevent's hub, not to the caller)."""
    try:
        return True, step()
    except BaseException as exc:  # noqa: BLE001 - handed to the caller, which raises it
        return False, exc


def _cancel(run: Run, ctl: str, users: list[str]) -> Check | None:
    """Cancel every corral-validate job left (bounded); a Check only when that failed."""
    try:
        proc = run(ctl, cancel_command(users), timeout=CANCEL_S)
    except CorralError as exc:
        return Check("jobs cancelled", "FAIL", f"scancel --name=corral-validate: {error_text(exc)}")
    if proc.returncode != 0:
        tail = ((proc.stderr or proc.stdout).strip().splitlines() or ["no output"])[-1]
        return Check("jobs cancelled", "FAIL", f"scancel --name=corral-validate on {ctl} (rc={proc.returncode}): {tail}")
    return None


def contract(nodes_total: int | None = None) -> dict:
    """The DeepOps validate_slurm.py fields, before anything is known."""
    return {"slurm_version": None, "controller_reachable": False, "nodes_total": nodes_total,
            "nodes_available": 0, "gpus_configured": 0, "gpu_job_ok": None, "acceptance": figures()}


def failed(message: str, nodes_total: int | None = None) -> Report:
    """A report that is one failure (the CLI's answer when validate could not run at all)."""
    return Report(checks=[Check("validate", "FAIL", message)], extra=contract(nodes_total))


def validate(cluster: Cluster, *, jobs: bool = True, run: Run | None = None,
             timeout_s: int = TIMEOUT_S, fabric: bool = False) -> Report:
    """`run`: how a command reaches a node (default: SSH, see remote()); `timeout_s`: the job phase,
    all jobs together; `fabric`: also the RDMA pairs of checks/fabric.py. Returns a report whatever failed; only KeyboardInterrupt leaves (after the cancel).
    Over SSH, each node's commands share one connection for the run (engine.remote.shared_connections)."""
    if run is not None:
        return _validate(cluster, jobs=jobs, run=run, timeout_s=timeout_s, fabric=fabric)
    with shared_connections():
        return _validate(cluster, jobs=jobs, run=remote(cluster), timeout_s=timeout_s, fabric=fabric)


def _validate(cluster: Cluster, *, jobs: bool, run: Run, timeout_s: int, fabric: bool) -> Report:
    ctl = cluster.with_role("controller")[0].name
    compute = [n.name for n in cluster.with_role("compute")]
    report = Report(extra=contract(len(compute)))
    submitted_as: list[str] = []  # whose corral-validate jobs the finally cancels
    try:
        answered = _controller(cluster, run, report)
        if answered is None:
            return report
        ctl = answered  # the node scontrol answered on: the backup's when the primary's is unreachable
        report.checks.append(restart_check(run, ctl))  # jobs an unclean restart of slurmctld lost, by ID
        shown = _nodes(cluster, run, ctl, report)
        reached = reach(run, compute, shown)
        report.checks.append(reached.check)
        def munge() -> Check:
            return _munge(cluster, run, ctl, reached.unreachable)
        if jobs:  # the jobs and munge's check are independent: at once
            submitted_as += ["root", *filter(None, [submitter(cluster)])]
            outcomes = pmap(_outcome, [lambda: _jobs(cluster, run, ctl, report, reached.skipped, shown,
                                                     Budget(timeout_s)), munge])
            for raised in [o for ok, o in outcomes if not ok]:
                raise raised  # the finally below still cancels every job
            report.checks.append(outcomes[1][1])
        else:
            report.checks.append(Check("jobs", "SKIPPED", "--skip-jobs: read-only run"))
            report.checks.append(munge())
        checks, report.extra["acceptance"] = acceptance(cluster, run, ctl, reached.skipped, jobs)
        report.checks += checks
        if fabric:  # --fabric: RDMA pairs along the topology (checks/fabric.py), from the facts the last run read
            from corral.checks.fabric import fabric_checks
            from corral.facts.ibnetdiscover import load_fabric_cache
            from corral.facts.slurm import load_hw_cache
            checks, report.extra["fabric"] = fabric_checks(cluster, run, ctl, load_hw_cache(cluster.state_dir),
                                                           load_fabric_cache(cluster.state_dir), reached.skipped, jobs)
            report.checks += checks
    except CorralError as exc:
        report.checks.append(Check("validate", "FAIL", error_text(exc, command=True)))
    finally:
        if submitted_as:
            cancelled = _cancel(run, ctl, submitted_as)
            if cancelled:
                report.checks.append(cancelled)
    return report
