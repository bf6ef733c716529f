"""The acceptance tools' output, parsed and judged (checks/acceptance_parse.py, acceptance_eval.py) on
captured and composed output (tests/fixtures/acceptance/README.md says where each comes from):
DCGM 3.x and 4.x JSON, gpu_burn's \\r-redrawn progress and verdicts, all_reduce_perf's table and footer;
the floors: a GPU or a node under its floor, with errors, dead or unmeasured FAILs, naming it."""

from __future__ import annotations

from pathlib import Path

import pytest

from corral.checks.acceptance_eval import burn_verdict, dcgm_verdict, nccl_verdict
from corral.checks.acceptance_parse import parse_all_reduce, parse_dcgm_diag, parse_gpu_burn

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "acceptance"


def read(name: str) -> str:
    with open(FIX / name, newline="") as f:  # keep gpu_burn's \r
        return f.read()


# --- dcgmi diag -j -----------------------------------------------------------------------------------

def test_dcgm4_pass_has_one_result_per_gpu():
    diag = parse_dcgm_diag(read("dcgm4_diag_r1_pass.json"))
    assert diag.version == "4.1.1" and diag.error is None
    assert [(r.category, r.test, r.entity, r.status) for r in diag.results] == [
        ("Deployment", "software", f"GPU {i}", "pass") for i in range(4)]
    assert dcgm_verdict(read("dcgm4_diag_r1_pass.json"), "", 0, 1) == (
        "OK", "level 1: software passed (DCGM 4.1.1)", {"level": 1, "version": "4.1.1", "fail": [], "warn": []})


def test_dcgm4_failure_names_the_test_the_gpu_and_dcgms_message():
    status, detail, fig = dcgm_verdict(read("dcgm4_diag_r2_fail.json"), "", 226, 2)
    assert status == "FAIL"
    assert detail == ("software on GPU 2: Fail: Page Retirement/Row Remap: GPU 2 had uncorrectable memory errors "
                      "and row remapping failed. Row remapping failure indicates unrecoverable memory hardware "
                      "damage. Reset the GPU or reboot the node immediately.")
    assert fig["fail"] == ["software on GPU 2"] and fig["warn"] == ["software on GPU 1"]
    skipped = [(r.test, r.entity) for r in parse_dcgm_diag(read("dcgm4_diag_r2_fail.json")).results if r.status == "skip"]
    assert skipped == [("memory", "GPU 2"), ("pcie", "GPU 2")]


def test_dcgm4_warning_alone_warns():
    text = read("dcgm4_diag_r2_fail.json").replace('"status" : "Fail"', '"status" : "Pass"')
    status, detail, _ = dcgm_verdict(text, "", 0, 2)
    assert status == "WARN" and detail.startswith("software on GPU 1: Warn: Persistence Mode: Persistence mode for "
                                                  "GPU 1 is disabled.")


def test_dcgm3_deployment_tests_and_their_warnings_key():
    diag = parse_dcgm_diag(read("dcgm3_diag_r1_fail.json"))
    assert diag.version == "3.3.9" and len(diag.results) == 9
    bad = [r for r in diag.results if r.status != "pass"]
    assert [(r.test, r.entity, r.status) for r in bad] == [("Page Retirement/Row Remap", "GPU 2", "fail")]
    assert bad[0].messages == ("GPU 2 had uncorrectable memory errors and row remapping failed. Run a field "
                               "diagnostic on the GPU.",)


def test_dcgm_that_did_not_run_or_printed_no_json_fails_saying_why():
    assert dcgm_verdict(read("dcgm4_diag_runtime_error.json"), "", 226, 1)[:2] == (
        "FAIL", "dcgmi diag -r 1 did not run: Error: Diagnostic could not be run while DCGM is paused.")
    status, detail, _ = dcgm_verdict("", "Error: unable to establish a connection to the specified host: localhost\n",
                                     255, 1)
    assert status == "FAIL" and "no result (no JSON in the output; rc=255: Error: unable to establish" in detail
    with pytest.raises(ValueError, match="not dcgmi diag JSON"):
        parse_dcgm_diag('{"something": "else"}')


def test_dcgm4_summary_failure_tied_to_no_gpu_is_kept():
    text = ('{"DCGM Diagnostic": {"test_categories": [{"category": "Hardware", "tests": [{"name": "memory", '
            '"results": [{"entity_group": "GPU", "entity_group_id": 1, "entity_id": 0, "status": "Pass"}], '
            '"test_summary": {"status": "Fail", "warnings": [{"error_category": 16, "error_id": 1, '
            '"error_severity": 3, "warning": "the plugin crashed"}]}}]}]}}')
    status, detail, _ = dcgm_verdict(text, "", 226, 2)
    assert (status, detail) == ("FAIL", "memory: Fail: the plugin crashed")


# --- gpu_burn ----------------------------------------------------------------------------------------

def test_gpu_burn_figures_per_gpu_from_the_redrawn_records():
    gpus, tested = parse_gpu_burn(read("gpu_burn_h100x4_ok.txt"))
    assert tested == 4 and [g.index for g in gpus] == [0, 1, 2, 3]
    assert all(49000 < g.gflops < 51000 and g.errors == 0 and not g.died and g.faulty is False for g in gpus)
    status, detail, fig = burn_verdict(read("gpu_burn_h100x4_ok.txt"), "", 0, 4, 20.4, "h100")
    assert status == "OK" and detail == "4 GPUs: 49.6, 49.3, 50.5, 50.0 TFLOPS (floor 20.4)"
    assert fig == {"tflops": [49.6, 49.3, 50.5, 50.0], "floor": 20.4}


def test_a_gpu_with_errors_and_a_slow_gpu_fail_by_name():
    status, detail, fig = burn_verdict(read("gpu_burn_h100x4_faulty.txt"), "", 0, 4, 20.4, "h100")
    assert status == "FAIL"
    assert detail == "GPU 2: 524288 compare errors (FAULTY); GPU 3: 6.8 TFLOPS < floor 20.4 (h100)"
    assert fig["tflops"][:2] == [49.3, 49.6]


def test_the_floor_is_what_judges(monkeypatch):
    assert burn_verdict(read("gpu_burn_h100x4_ok.txt"), "", 0, 4, 49.5, "h100")[1] == \
        "GPU 1: 49.3 TFLOPS < floor 49.5 (h100)"
    status, detail, _ = burn_verdict(read("gpu_burn_h100x4_ok.txt"), "", 0, 4, None, "b200")
    assert status == "WARN" and detail.endswith("no floor for b200: not judged (acceptance.burn.floor_tflops)")


def test_captured_runs_faulty_unmeasured_dead():
    gpus, tested = parse_gpu_burn(read("gpu_burn_issue12_faulty.txt"))  # exit status 0 all the same
    assert tested == 16 and all(g.faulty for g in gpus) and gpus[1].errors == 524288000 and gpus[0].errors == 0
    status, detail, _ = burn_verdict(read("gpu_burn_issue12_faulty.txt"), "", 0, 16, 3.0, "v100")
    assert status == "FAIL" and detail.startswith("GPU 0: 0 compare errors (FAULTY); GPU 1: 524288000 compare errors")
    # "GPU 0: OK" yet not a single record: no measurement
    assert burn_verdict(read("gpu_burn_issue124_no_results.txt"), "", 0, 1, 3.0, "a2000")[:2] == (
        "FAIL", "GPU 0: no measurement")
    status, detail, fig = burn_verdict(read("gpu_burn_issue69_died.txt"), "\n\nNo clients are alive!  Aborting\n",
                                       123, 8, 3.0, "v100")
    assert (status, detail) == ("FAIL", "gpu_burn did not finish (rc=123): No clients are alive!  Aborting")
    assert all(g.died for g in parse_gpu_burn(read("gpu_burn_issue69_died.txt"))[0])


def test_a_burn_that_saw_fewer_gpus_than_the_node_has_fails():
    status, detail, _ = burn_verdict(read("gpu_burn_h100x4_ok.txt"), "", 0, 8, 20.4, "h100")
    assert status == "FAIL" and detail == "gpu_burn tested 4 GPUs, the node has 8"


# --- all_reduce_perf -----------------------------------------------------------------------------------

def test_all_reduce_table_and_footer():
    run = parse_all_reduce(read("all_reduce_perf_h100x4_nvlink.txt"))
    assert (run.sizes, run.ngpus, run.ranks, run.wrong, run.out_of_bounds) == (8, 4, 4, 0, 0)
    assert run.avg_busbw == 305.808 and run.peak_busbw == 354.92 and run.busbw[:2] == [197.62, 197.27]
    assert nccl_verdict(read("all_reduce_perf_h100x4_nvlink.txt"), "", 0, 4, 300.0) == (
        "OK", "4 GPUs: bus bandwidth 354.9 GB/s, avg 305.8 (floor 300)", {"peak": 354.92, "avg": 305.808, "gpus": 4})


def test_all_reduce_under_the_floor_or_wrong_fails():
    status, detail, fig = nccl_verdict(read("all_reduce_perf_h100x4_pcie_wrong.txt"), "", 1, 4, 100.0)
    assert status == "FAIL"
    assert detail == "512 wrong elements (out of bounds values: 1); bus bandwidth 11.9 GB/s < floor 100"
    assert nccl_verdict(read("all_reduce_perf_h100x4_nvlink.txt"), "", 0, 4, None)[0] == "WARN"
    assert nccl_verdict(read("all_reduce_perf_h100x4_nvlink.txt"), "", 0, 8, 300.0)[1] == \
        "ran on 4 GPUs, the node has 8"


def test_captured_rows_of_an_older_run_and_a_failure_line():
    run = parse_all_reduce(read("all_reduce_perf_issue119_tail.txt"))
    assert (run.sizes, run.peak_busbw, run.avg_busbw, run.ngpus) == (6, 96.69, 84.8558, None)
    # common.h's NCCLCHECK: "%s: Test NCCL failure %s:%d '%s / %s'" (nccl-tests >= 2.13 with NCCL >= 2.13)
    failed = ("# nThread 1 nGpus 4 minBytes 8388608 maxBytes 1073741824 step: 2(factor) warmup iters: 1 iters: 20 "
              "agg iters: 1 validation: 1 graph: 0\n"
              "gpu02: Test NCCL failure common.cu:1279 'unhandled cuda error (run with NCCL_DEBUG=INFO for details) / '\n"
              " .. gpu02 pid 48213: Test failure common.cu:1181\n")
    status, detail, _ = nccl_verdict(failed, "", 3, 4, 100.0)
    assert status == "FAIL" and detail.startswith("all_reduce_perf: gpu02: Test NCCL failure common.cu:1279 "
                                                  "'unhandled cuda error")
    assert nccl_verdict("", "bash: line 1: all_reduce_perf: command not found\n", 127, 4, 1.0)[1] == \
        "all_reduce_perf printed no result (rc=127): bash: line 1: all_reduce_perf: command not found"
