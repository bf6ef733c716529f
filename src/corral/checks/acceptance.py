"""validate's GPU acceptance on real GPUs: "dcgm diag" (`dcgmi diag -r LEVEL -j`), "gpu burn" (gpu_burn:
TFLOPS per GPU against its model's floor) and "nccl all-reduce" (all_reduce_perf over all GPUs of a node
against the bus bandwidth floor); SKIPPED with the reason on the virtual cluster (emulated GPUs), with
--skip-jobs, and where the spec does not ask for them. "nccl across nodes": with
acceptance.nccl.across_nodes, one MPI all_reduce_perf over every GPU of the nodes (checks/acceptance_across.py).

How they run: as Slurm jobs from the controller, one per GPU compute node that passed the reachability
pass: `srun -J corral-validate -N1 -w NODE --exclusive --gres=gpu:N`, so that no user job shares the
node while it is stressed (and none is disturbed: a node with jobs is not allocated; the job is
withdrawn after START_S, `--immediate`, and the node named "did not start"). Not over SSH: a node that
looks idle can be given a job the next second. Nodes in parallel (WORKERS at once), one tool after the
other.

Bounds (their own, not --timeout's job phase: a diagnostic or a burn takes minutes): each job waits at
most START_S to start and runs at most its tool's bound (`-t` in minutes, and `timeout` on the
controller): DCGM_RUN_S per level, the burn's seconds + BURN_MARGIN_S (allocating 90 % of GPU memory,
the PTX JIT, gpu_burn's SIGTERM wait `-stts 5`), NCCL_RUN_S. A job that does not finish is ended there
and named per node; validate's `finally` cancels whatever corral-validate job is left. MIG nodes are
skipped (the tools need whole GPUs).

Figures for the JSON report (`acceptance`): dcgm_diag {node: {level, version, fail, warn}},
gpu_tflops {node: [TFLOPS per GPU, in the job's device order]}, nccl_busbw_gbps {node: {peak, avg, gpus}}."""

from __future__ import annotations

import math
import shlex
from collections.abc import Callable

from corral.checks.acceptance_eval import burn_verdict, dcgm_verdict, nccl_verdict, tail
from corral.checks.jobs import GRACE_S, NAME, TIMED_OUT, Run, not_done
from corral.checks.result import Check, error_text, summarize
from corral.errors import CorralError
from corral.parallel import pmap
from corral.render.acceptance import ALL_REDUCE, GPU_BURN, GPU_BURN_COMPARE
from corral.spec.mig import layout
from corral.spec.models_acceptance import burn_floor

START_S = 30
DCGM_RUN_S = {1: 300, 2: 900, 3: 3600}
BURN_MARGIN_S = 90
NCCL_RUN_S = 300
WORKERS = 64  # nodes tested at once (an SSH session to the controller each)
NCCL_SIZES = ("-b", "8M", "-e", "1G", "-f", "2")
VIRTUAL = "emulated GPUs (virtual cluster): no compute to measure"
NAMES = ("dcgm diag", "gpu burn", "nccl all-reduce")


def figures() -> dict:
    return {"dcgm_diag": {}, "gpu_tflops": {}, "nccl_busbw_gbps": {}, "nccl_across": {}}


def acceptance_command(node: str, gpus: int, script: str, start_s: int, run_s: int) -> str:
    """srun of one exclusive whole-node job named corral-validate, bounded as the module says."""
    minutes = max(1, math.ceil(int(run_s) / 60)) + 1
    return (f"timeout -k 5 {int(start_s + run_s + 5)} srun -J {NAME} --immediate={int(start_s)} -t {int(minutes)} "
            f"-N1 -w {shlex.quote(node)} --exclusive --gres=gpu:{int(gpus)} bash -c {shlex.quote(script)}")


def tool_script(path: str, args: list[str]) -> str:
    """Run an installed tool, or say it is missing (exit 127)."""
    q = shlex.quote
    return (f"test -x {q(path)} || {{ echo {q(f'{path} missing: corral apply builds it (acceptance)')} >&2; "
            f"exit 127; }}; cd /tmp && {q(path)} {' '.join(q(a) for a in args)}")


def _run_tool(name: str, run: Run, ctl: str, nodes: list, skipped: dict[str, str], script: Callable,
              run_s: int, verdict: Callable, store: dict) -> Check:
    per_node: dict[str, tuple[str, str]] = {}
    todo = []
    for n in nodes:
        mig = layout(n.gpus)
        if n.name in skipped:
            per_node[n.name] = ("FAIL", f"not tested ({skipped[n.name]})")
        elif mig is not None and any(mig.values()):
            per_node[n.name] = ("SKIPPED", "MIG enabled: the tools need whole GPUs")
        elif script(n) is None:
            per_node[n.name] = ("SKIPPED", f"{n.gpu_count} GPU: nothing to all-reduce within the node")
        else:
            todo.append(n)

    def one(n) -> tuple[str, tuple[str, str], dict | None]:
        cmd = acceptance_command(n.name, n.gpu_count, script(n), START_S, run_s)
        try:
            proc = run(ctl, cmd, timeout=START_S + run_s + GRACE_S)
        except CorralError as exc:
            return n.name, ("FAIL", f"{name}: srun: {error_text(exc)}"), None
        if proc.returncode in TIMED_OUT:
            return n.name, ("FAIL", f"{name} did not finish within {run_s} s (ended): {tail(proc.stdout)}"), None
        if not (proc.stdout or "").strip():
            return n.name, ("FAIL", not_done(name, proc, START_S)), None
        status, detail, fig = verdict(n, proc)
        return n.name, (status, detail), fig

    for node, result, fig in pmap(one, todo, workers=WORKERS):
        per_node[node] = result
        if fig:
            store[node] = fig
    return summarize(name, per_node, f"{name}: every GPU compute node passed")


def acceptance(cluster, run: Run, ctl: str, skipped: dict[str, str], jobs: bool = True) -> tuple[list[Check], dict]:
    """The acceptance checks (names stable: NAMES, then "nccl across nodes") and their figures."""
    acc, out = cluster.spec.acceptance, figures()
    nodes = [n for n in cluster.with_role("compute") if n.gpu_count]
    why = VIRTUAL if cluster.spec.virtual is not None else "--skip-jobs: read-only run" if not jobs else \
        "no compute node has GPUs" if not nodes else None
    if why:
        return [Check(name, "SKIPPED", why) for name in NAMES], out
    checks = []
    if not acc.dcgm_diag_level:
        checks.append(Check("dcgm diag", "SKIPPED", "acceptance.dcgm_diag_level: 0"))
    elif not cluster.spec.nvidia.dcgm.enabled:
        checks.append(Check("dcgm diag", "SKIPPED", "nvidia.dcgm.enabled is false: dcgmi is not deployed"))
    else:
        level = acc.dcgm_diag_level
        checks.append(_run_tool("dcgm diag", run, ctl, nodes, skipped,
                                lambda n: f"dcgmi diag -r {int(level)} -j", DCGM_RUN_S[level],
                                lambda n, p: dcgm_verdict(p.stdout, p.stderr, p.returncode, level), out["dcgm_diag"]))
    burn = acc.burn
    if not burn.enabled:
        checks.append(Check("gpu burn", "SKIPPED", "acceptance.burn.enabled is false"))
    else:
        args = ["-stts", "5", "-c", GPU_BURN_COMPARE, str(int(burn.seconds))]
        burned: dict[str, dict] = {}
        checks.append(_run_tool("gpu burn", run, ctl, nodes, skipped, lambda n: tool_script(GPU_BURN, args),
                                burn.seconds + BURN_MARGIN_S,
                                lambda n, p: burn_verdict(p.stdout, p.stderr, p.returncode, n.gpu_count,
                                                          burn_floor(burn, n.gpus.model), n.gpus.model), burned))
        out["gpu_tflops"] = {node: fig["tflops"] for node, fig in burned.items()}
    nccl = acc.nccl
    if not nccl.enabled:
        checks.append(Check("nccl all-reduce", "SKIPPED", "acceptance.nccl.enabled is false"))
    else:
        script = (lambda n: tool_script(ALL_REDUCE, [*NCCL_SIZES, "-g", str(n.gpu_count)]) if n.gpu_count > 1 else None)
        checks.append(_run_tool("nccl all-reduce", run, ctl, nodes, skipped, script, NCCL_RUN_S,
                                lambda n, p: nccl_verdict(p.stdout, p.stderr, p.returncode, n.gpu_count,
                                                          nccl.floor_busbw_gbps), out["nccl_busbw_gbps"]))
        if len(nodes) > 1:  # checks/acceptance_across.py: one MPI run over every GPU, when asked for
            from corral.checks.acceptance_across import across
            check, out["nccl_across"] = across(cluster, run, ctl, nodes, skipped)
            checks.append(check)
    return checks, out
