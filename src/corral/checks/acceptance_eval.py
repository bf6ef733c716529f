"""Each acceptance tool's output on one node -> (status, detail, figures) (pure; parsers in
acceptance_parse.py). The floors: a GPU under its model's TFLOPS floor, with compare errors, dead, or
without a measurement FAILs naming the GPU; a node's all-reduce under the bus bandwidth floor (the
highest busbw over the message sizes), with wrong elements or an NCCL/CUDA failure FAILs. No floor
known: WARN (measured, not judged). DCGM: a failed test FAILs naming the test, the GPU and DCGM's
message; a warning WARNs."""

from __future__ import annotations

from corral.checks.acceptance_parse import parse_all_reduce, parse_dcgm_diag, parse_gpu_burn

Verdict = tuple[str, str, dict]
MESSAGE_CHARS = 240


def tail(text: str, lines: int = 1) -> str:
    out = " / ".join(line.strip() for line in (text or "").strip().splitlines()[-lines:])
    return out[-MESSAGE_CHARS:] or "no output"


def _label(r) -> str:
    return f"{r.test} on {r.entity}" if r.entity else r.test


def dcgm_verdict(stdout: str, stderr: str, rc: int, level: int) -> Verdict:
    try:
        diag = parse_dcgm_diag(stdout)
    except ValueError as exc:
        return "FAIL", f"dcgmi diag -r {level}: no result ({exc}; rc={rc}: {tail(stderr or stdout)})", {}
    fig = {"level": level, "version": diag.version,
           "fail": [_label(r) for r in diag.results if r.status == "fail"],
           "warn": [_label(r) for r in diag.results if r.status == "warn"]}
    if diag.error:
        return "FAIL", f"dcgmi diag -r {level} did not run: {' '.join(diag.error.split())[:MESSAGE_CHARS]}", \
            {**fig, "error": diag.error}
    if not diag.results:
        return "FAIL", f"dcgmi diag -r {level} reported no test (rc={rc})", fig
    for status, verdict in (("fail", "FAIL"), ("warn", "WARN")):
        bad = [r for r in diag.results if r.status == status]
        if bad:
            return verdict, "; ".join(f"{_label(r)}: {status.capitalize()}" + (
                f": {r.messages[0][:MESSAGE_CHARS]}" if r.messages else "") for r in bad), fig
    tests = sorted({r.test for r in diag.results})
    return "OK", f"level {level}: {', '.join(tests)} passed (DCGM {diag.version or 'version unknown'})", fig


def burn_verdict(stdout: str, stderr: str, rc: int, gpus: int, floor: float | None, model: str) -> Verdict:
    found, tested = parse_gpu_burn(stdout)
    tflops = [round(g.gflops / 1000, 1) for g in found]
    if tested is None:
        return "FAIL", f"gpu_burn did not finish (rc={rc}): {tail(stderr or stdout)}", {"tflops": tflops}
    problems = [] if tested == gpus else [f"gpu_burn tested {tested} GPUs, the node has {gpus}"]
    for g, tf in zip(found, tflops):
        if g.died:
            problems.append(f"GPU {g.index} died")
        elif g.faulty or g.errors:
            problems.append(f"GPU {g.index}: {g.errors} compare errors (FAULTY)")
        elif g.gflops <= 0:
            problems.append(f"GPU {g.index}: no measurement")
        elif floor is not None and tf < floor:
            problems.append(f"GPU {g.index}: {tf:.1f} TFLOPS < floor {floor:g} ({model})")
    figures = {"tflops": tflops, "floor": floor}
    if problems:
        return "FAIL", "; ".join(problems), figures
    measured = f"{len(found)} GPUs: {', '.join(f'{t:.1f}' for t in tflops)} TFLOPS"
    if floor is None:
        return "WARN", f"{measured}; no floor for {model}: not judged (acceptance.burn.floor_tflops)", figures
    return "OK", f"{measured} (floor {floor:g})", figures


def nccl_verdict(stdout: str, stderr: str, rc: int, gpus: int, floor: float | None) -> Verdict:
    run = parse_all_reduce(stdout)
    figures = {"peak": run.peak_busbw, "avg": run.avg_busbw, "gpus": run.ngpus}
    if run.failures:
        return "FAIL", f"all_reduce_perf: {run.failures[0]}", figures
    if not run.sizes:
        return "FAIL", f"all_reduce_perf printed no result (rc={rc}): {tail(stderr or stdout)}", figures
    problems = [] if run.ngpus in (None, gpus) else [f"ran on {run.ngpus} GPUs, the node has {gpus}"]
    if run.wrong or run.out_of_bounds:
        problems.append(f"{run.wrong} wrong elements (out of bounds values: {run.out_of_bounds})")
    if floor is not None and run.peak_busbw is not None and run.peak_busbw < floor:  # a size read: a peak
        problems.append(f"bus bandwidth {run.peak_busbw:.1f} GB/s < floor {floor:g}")
    if problems:
        return "FAIL", "; ".join(problems), figures
    avg = f", avg {run.avg_busbw:.1f}" if run.avg_busbw is not None else ""
    measured = f"{run.ngpus or gpus} GPUs: bus bandwidth {run.peak_busbw:.1f} GB/s{avg}"
    if floor is None:
        return "WARN", f"{measured}; no floor: not judged (acceptance.nccl.floor_busbw_gbps)", figures
    return "OK", f"{measured} (floor {floor:g})", figures
