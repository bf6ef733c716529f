"""validate's "nccl across nodes" (acceptance.nccl.across_nodes): one all_reduce_perf over every GPU of every
GPU compute node that passed the reachability pass, as one exclusive Slurm job from the controller (`srun
--mpi=pmix -N<nodes> --ntasks-per-node=<GPUs> --gres=gpu:<GPUs>`, one rank per GPU: the MPI build
render/acceptance.py makes), judged against acceptance.nccl.floor_across_busbw_gbps. MIG nodes and nodes
with fewer GPUs than the others' least are left out (ranks per node must be equal); fewer than two nodes
left: SKIPPED."""

from __future__ import annotations

import math
import shlex

from corral.checks.acceptance_eval import tail
from corral.checks.acceptance_parse import parse_all_reduce
from corral.checks.jobs import GRACE_S, NAME, TIMED_OUT, Run, not_done
from corral.checks.result import Check, error_text
from corral.errors import CorralError
from corral.render.acceptance import ALL_REDUCE_MPI
from corral.render.hw import hostlist
from corral.spec.mig import layout

START_S = 30
RUN_S = 600
SIZES = ("-b", "8M", "-e", "1G", "-f", "2")
NOT_ASKED = ("not run: set acceptance.nccl.across_nodes (nccl-tests built with Debian's Open MPI, run with srun "
             "--mpi=pmix)")


def across_command(nodes: list[str], gpus: int) -> str:
    limit = math.ceil((START_S + RUN_S) / 60)
    args = " ".join(shlex.quote(a) for a in SIZES)
    return (f"timeout -k 5 {int(START_S + RUN_S)} srun -J {NAME} --immediate={int(START_S)} -t {int(limit)} --exclusive "
            f"--mpi=pmix -N{len(nodes)} -w {shlex.quote(hostlist(nodes))} --ntasks-per-node={int(gpus)} "
            f"--gres=gpu:{int(gpus)} {shlex.quote(ALL_REDUCE_MPI)} {args} -g 1")  # shell-ok: args quoted above


def across(cluster, run: Run, ctl: str, nodes: list, skipped: dict[str, str]) -> tuple[Check, dict]:
    nccl = cluster.spec.acceptance.nccl
    if not nccl.across_nodes:
        return Check("nccl across nodes", "SKIPPED", NOT_ASKED), {}
    whole = [n for n in nodes if n.name not in skipped and not any((layout(n.gpus) or {}).values())]
    if len(whole) < 2:
        return Check("nccl across nodes", "SKIPPED", f"{len(whole)} GPU compute node(s) with whole GPUs passed "
                     "the reachability pass: nothing to run across"), {}
    gpus = min(n.gpu_count for n in whole)
    names = [n.name for n in whole]
    left = {n.name: f"not in the run ({skipped[n.name]})" for n in nodes if n.name in skipped}
    try:
        proc = run(ctl, across_command(names, gpus), timeout=START_S + RUN_S + GRACE_S)
    except CorralError as exc:
        return Check("nccl across nodes", "FAIL", f"srun: {error_text(exc)}", left), {}
    if proc.returncode in TIMED_OUT:
        return Check("nccl across nodes", "FAIL", f"did not finish within {RUN_S} s (ended): {tail(proc.stdout)}",
                     left), {}
    if not (proc.stdout or "").strip():
        return Check("nccl across nodes", "FAIL", not_done("all_reduce_perf across nodes", proc, START_S), left), {}
    status, detail = verdict(proc.stdout, proc.stderr, proc.returncode, gpus * len(names),
                             nccl.floor_across_busbw_gbps)
    run_ = parse_all_reduce(proc.stdout)
    return (Check("nccl across nodes", status, f"{hostlist(names)}: {detail}", left),
            {"nodes": names, "ranks": run_.ranks, "peak": run_.peak_busbw, "avg": run_.avg_busbw})


def verdict(stdout: str, stderr: str, rc: int, ranks: int, floor: float | None) -> tuple[str, str]:
    """One rank per GPU: every rank listed, no wrong element, the peak bus bandwidth over the floor."""
    run_ = parse_all_reduce(stdout)
    if run_.failures:
        return "FAIL", f"all_reduce_perf: {run_.failures[0]}"
    if not run_.sizes:
        return "FAIL", f"all_reduce_perf printed no result (rc={rc}): {tail(stderr or stdout)}"
    problems = [] if run_.ranks == ranks else [f"{run_.ranks} ranks ran, {ranks} GPUs were asked for"]
    if run_.wrong or run_.out_of_bounds:
        problems.append(f"{run_.wrong} wrong elements (out of bounds values: {run_.out_of_bounds})")
    if floor is not None and run_.peak_busbw is not None and run_.peak_busbw < floor:  # a size read: a peak
        problems.append(f"bus bandwidth {run_.peak_busbw:.1f} GB/s < floor {floor:g}")
    if problems:
        return "FAIL", "; ".join(problems)
    measured = f"{ranks} GPUs: bus bandwidth {run_.peak_busbw:.1f} GB/s, avg {run_.avg_busbw or 0:.1f}"
    if floor is None:
        return "WARN", f"{measured}; no floor: not judged (acceptance.nccl.floor_across_busbw_gbps)"
    return "OK", f"{measured} (floor {floor:g})"
