"""validate's GPU acceptance through its seam (checks/acceptance.py): exclusive whole-node jobs named
corral-validate, each with its own bound; per-node verdicts from the tools' output
(tests/fixtures/acceptance/); figures in the JSON report; SKIPPED with the reason on the virtual
cluster, with --skip-jobs and where the spec does not ask; a job that does not start or finish is named
per node and the run still ends with the cancel."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

import corral.checks.jobs as J
import corral.checks.validate as V
from corral.checks.acceptance import acceptance
from corral.spec.loader import load_text
from tests.unit.validate_capture import ACCEPT, SPEC, Captured

SUM = "a" * 64
ENABLED = (f"nvidia: {{cuda_toolkit: {{version: '12.4'}}}}\n"
           f"acceptance: {{burn: {{enabled: true, sha256: {SUM}}}, nccl: {{enabled: true, sha256: {SUM}, "
           f"floor_busbw_gbps: 300}}}}\n")
BURN_OK = (0, (ACCEPT / "gpu_burn_h100x4_ok.txt").read_bytes().decode(), "")
NCCL_OK = (0, (ACCEPT / "all_reduce_perf_h100x4_nvlink.txt").read_text(), "")
BURN = "/usr/local/lib/corral/gpuburn/gpu_burn "   # in the burn's srun only
NCCL = "/usr/local/lib/corral/nccl-tests/all_reduce_perf "
CANCEL = "scancel --name=corral-validate --user=root"


@pytest.fixture(autouse=True)
def no_waiting(monkeypatch):
    monkeypatch.setattr(V, "time", SimpleNamespace(sleep=lambda s: None))
    monkeypatch.setattr(J, "monotonic", lambda: 1000.0)


def runner(**first) -> Captured:
    """Captured with the acceptance answers; `first`: answers (command part -> answer) tried before them."""
    run = Captured()
    run.answers = {**first, BURN: BURN_OK, NCCL: NCCL_OK, **run.answers}
    return run


def checks(report) -> dict[str, tuple[str, str]]:
    return {c.name: (c.status, c.message) for c in report.checks}


def node_of(command: str) -> str:
    return command.split(" -w ")[1].split()[0]


def test_all_three_pass_with_their_figures_in_the_report():
    run = runner()
    report = V.validate(load_text(SPEC + ENABLED, "cluster.yaml"), run=run)
    got = checks(report)
    assert got["dcgm diag"] == ("OK", "dcgm diag: every GPU compute node passed")
    assert got["gpu burn"] == ("OK", "gpu burn: every GPU compute node passed")
    assert got["nccl all-reduce"] == ("OK", "nccl all-reduce: every GPU compute node passed")
    assert got["nccl across nodes"] == ("SKIPPED", "not run: set acceptance.nccl.across_nodes (nccl-tests built with "
                                                   "Debian's Open MPI, run with srun --mpi=pmix)")
    burn = next(c for c in report.checks if c.name == "gpu burn")
    assert burn.nodes["gpu01"] == "OK: 4 GPUs: 49.6, 49.3, 50.5, 50.0 TFLOPS (floor 20.4)"
    data = report.to_json()
    assert data["ok"] and data["acceptance"]["gpu_tflops"] == {"gpu01": [49.6, 49.3, 50.5, 50.0],
                                                               "gpu02": [49.6, 49.3, 50.5, 50.0]}
    assert data["acceptance"]["nccl_busbw_gbps"]["gpu02"] == {"peak": 354.92, "avg": 305.808, "gpus": 4}
    burns = sorted(c for c in run.sent("ctl") if BURN in c)
    assert burns[0] == ("timeout -k 5 185 srun -J corral-validate --immediate=30 -t 4 -N1 -w gpu01 --exclusive "
                        "--gres=gpu:4 bash -c 'test -x /usr/local/lib/corral/gpuburn/gpu_burn || { echo '\"'\"'"
                        "/usr/local/lib/corral/gpuburn/gpu_burn missing: corral apply builds it (acceptance)'\"'\"' "
                        ">&2; exit 127; }; cd /tmp && /usr/local/lib/corral/gpuburn/gpu_burn -stts 5 -c "
                        "/usr/local/lib/corral/gpuburn/compare.ptx 60'")
    assert run.timeouts[burns[0]] == 30 + 60 + 90 + 15  # start, the burn, its margin, SSH and teardown
    ncclrun = sorted(c for c in run.sent("ctl") if NCCL in c)
    assert ncclrun[1].endswith("all_reduce_perf -b 8M -e 1G -f 2 -g 4'") and run.timeouts[ncclrun[1]] == 345
    sent = run.sent("ctl")  # one tool after the other, the cancel last
    assert max(i for i, c in enumerate(sent) if "dcgmi diag" in c) < min(i for i, c in enumerate(sent) if BURN in c)
    assert max(i for i, c in enumerate(sent) if BURN in c) < min(i for i, c in enumerate(sent) if NCCL in c)
    assert sent[-1] == CANCEL


def test_a_faulty_gpu_and_a_failed_diagnostic_fail_naming_node_gpu_and_test():
    faulty = (0, (ACCEPT / "gpu_burn_h100x4_faulty.txt").read_bytes().decode(), "")
    diag = (226, (ACCEPT / "dcgm4_diag_r2_fail.json").read_text(), "")
    run = runner(**{"-w gpu02 --exclusive --gres=gpu:4 bash -c 'test -x /usr/local/lib/corral/gpuburn/gpu_burn ": faulty,
                    "-w gpu01 --exclusive --gres=gpu:4 bash -c 'dcgmi ": diag})
    report = V.validate(load_text(SPEC + ENABLED, "cluster.yaml"), run=run)
    got = checks(report)
    assert got["gpu burn"] == ("FAIL", "gpu02: GPU 2: 524288 compare errors (FAULTY); GPU 3: 6.8 TFLOPS < floor "
                                       "20.4 (h100)")
    assert got["dcgm diag"][0] == "FAIL" and got["dcgm diag"][1].startswith(
        "gpu01: software on GPU 2: Fail: Page Retirement/Row Remap: GPU 2 had uncorrectable memory errors")
    assert not report.ok and report.to_json()["acceptance"]["dcgm_diag"]["gpu01"]["fail"] == ["software on GPU 2"]
    assert run.sent("ctl")[-1] == CANCEL


def test_a_job_that_does_not_start_or_finish_is_named_per_node_and_cancelled():
    busy = (1, "", "srun: Requested nodes are busy\nsrun: error: Unable to allocate resources: Requested nodes are busy\n")
    hung = (124, "\r50.0%  proc'd: 2256 (49574 Gflop/s) - 2256 (49312 Gflop/s)   errors: 0 - 0   temps: 61 C - 62 C ", "")
    run = runner(**{"-w gpu01 --exclusive --gres=gpu:4 bash -c 'test -x /usr/local/lib/corral/gpuburn/gpu_burn ": hung,
                    "-w gpu02 --exclusive --gres=gpu:4 bash -c 'test -x /usr/local/lib/corral/gpuburn/gpu_burn ": busy})
    report = V.validate(load_text(SPEC + ENABLED, "cluster.yaml"), run=run)
    burn = next(c for c in report.checks if c.name == "gpu burn")
    assert burn.status == "FAIL"
    assert burn.nodes["gpu01"].startswith("FAIL: gpu burn did not finish within 150 s (ended): 50.0%  proc'd")
    assert burn.nodes["gpu02"] == "FAIL: job did not start within 30 s (cancelled)"
    assert checks(report)["nccl all-reduce"][0] == "OK"  # the next tool still runs
    assert run.sent("ctl")[-1] == CANCEL


def test_nodes_that_failed_the_reachability_pass_get_no_acceptance_job():
    run = runner()
    run.nodes = {"gpu02": {"systemctl is-active slurmd munge": (3, "inactive\nactive\n", "")}}
    report = V.validate(load_text(SPEC + ENABLED, "cluster.yaml"), run=run)
    assert checks(report)["gpu burn"] == ("FAIL", "gpu02: not tested (slurmd not running)")
    assert not [c for c in run.sent("ctl") if " -w gpu02 --exclusive" in c]


def test_mig_nodes_and_single_gpu_nodes_are_skipped_by_name():
    spec = SPEC.replace("gpus: {model: h100, count: 4}", "gpus: {model: h100, count: 4, mig: "
                                                          "[{gpus: all, profiles: [7g.80gb]}]}")
    spec += "  - {names: gpu03, addresses: [10.0.0.13], roles: [compute], gpus: {model: h100, count: 1}}\n"
    nvidia = f"nvidia: {{cuda_toolkit: {{version: '12.4'}}, mig_parted: {{sha256: {{nvidia-mig-manager: {SUM}}}}}}}\n"
    cluster = load_text(spec + ENABLED.replace("nvidia: {cuda_toolkit: {version: '12.4'}}\n", nvidia), "cluster.yaml")
    run = runner()
    found, _ = acceptance(cluster, run, "ctl", {})
    by = {c.name: c for c in found}
    assert by["gpu burn"].nodes["gpu01"] == "SKIPPED: MIG enabled: the tools need whole GPUs"
    assert by["nccl all-reduce"].nodes["gpu03"] == "SKIPPED: 1 GPU: nothing to all-reduce within the node"
    assert by["gpu burn"].nodes["gpu03"] == "FAIL: gpu_burn tested 4 GPUs, the node has 1"  # the 4-GPU capture
    assert {node_of(c) for c in run.sent("ctl")} == {"gpu03"}


def test_virtual_cluster_skip_jobs_and_a_spec_that_does_not_ask():
    virtual = SPEC.replace("10.0.0.", "10.213.0.") + "virtual: {bridge: corral0}\n" + ENABLED
    run = runner()
    report = V.validate(load_text(virtual, "cluster.yaml"), run=run)
    reason = "emulated GPUs (virtual cluster): no compute to measure"
    assert {n: checks(report)[n] for n in ("dcgm diag", "gpu burn", "nccl all-reduce")} == {
        n: ("SKIPPED", reason) for n in ("dcgm diag", "gpu burn", "nccl all-reduce")}
    assert not [c for c in run.sent("ctl") if "--exclusive" in c]
    skip = V.validate(load_text(SPEC + ENABLED, "cluster.yaml"), run=runner(), jobs=False)
    assert checks(skip)["gpu burn"] == ("SKIPPED", "--skip-jobs: read-only run")
    plain = V.validate(load_text(SPEC + "nvidia: {dcgm: {enabled: false}}\n", "cluster.yaml"), run=runner())
    assert checks(plain)["dcgm diag"] == ("SKIPPED", "nvidia.dcgm.enabled is false: dcgmi is not deployed")
    assert checks(plain)["gpu burn"] == ("SKIPPED", "acceptance.burn.enabled is false")
    assert checks(plain)["nccl all-reduce"] == ("SKIPPED", "acceptance.nccl.enabled is false")
    off = V.validate(load_text(SPEC + "acceptance: {dcgm_diag_level: 0}\n", "cluster.yaml"), run=runner())
    assert checks(off)["dcgm diag"] == ("SKIPPED", "acceptance.dcgm_diag_level: 0")
    assert off.to_json()["acceptance"] == {"dcgm_diag": {}, "gpu_tflops": {}, "nccl_busbw_gbps": {}, "nccl_across": {}}


def test_level_3_gets_its_long_bound():
    run = runner()
    V.validate(load_text(SPEC + "acceptance: {dcgm_diag_level: 3}\n", "cluster.yaml"), run=run)
    diag = [c for c in run.sent("ctl") if "dcgmi diag -r 3 -j" in c]
    assert len(diag) == 2 and all(c.startswith("timeout -k 5 3635 srun ") and " -t 61 " in c for c in diag)
    assert {node_of(c) for c in diag} == {"gpu01", "gpu02"} and run.timeouts[diag[0]] == 3645


ACROSS_OUT = (0, (ACCEPT / "all_reduce_perf_2x4_mpi_derived.txt").read_text(), "")
MPI = "/usr/local/lib/corral/nccl-tests/all_reduce_perf_mpi "


def test_nccl_across_nodes_runs_one_mpi_job_over_every_gpu():
    spec = SPEC + ENABLED.replace("floor_busbw_gbps: 300", "floor_busbw_gbps: 300, across_nodes: true, "
                                                           "floor_across_busbw_gbps: 90")
    run = runner(**{MPI: ACROSS_OUT})
    report = V.validate(load_text(spec, "cluster.yaml"), run=run)
    got = checks(report)
    assert got["nccl across nodes"] == ("OK", "gpu[01-02]: 8 GPUs: bus bandwidth 103.5 GB/s, avg 89.2 (floor 90)")
    sent = [c for c in run.sent("ctl") if MPI in c]
    assert sent == ["timeout -k 5 630 srun -J corral-validate --immediate=30 -t 11 --exclusive --mpi=pmix -N2 "
                    "-w 'gpu[01-02]' --ntasks-per-node=4 --gres=gpu:4 /usr/local/lib/corral/nccl-tests/"
                    "all_reduce_perf_mpi -b 8M -e 1G -f 2 -g 1"]
    assert report.to_json()["acceptance"]["nccl_across"] == {"nodes": ["gpu01", "gpu02"], "ranks": 8, "peak": 103.52,
                                                            "avg": 89.194}
    strict = V.validate(load_text(spec.replace("floor_across_busbw_gbps: 90", "floor_across_busbw_gbps: 150"),
                                  "cluster.yaml"), run=runner(**{MPI: ACROSS_OUT}))
    assert checks(strict)["nccl across nodes"] == ("FAIL", "gpu[01-02]: bus bandwidth 103.5 GB/s < floor 150")
    four = (0, (ACCEPT / "all_reduce_perf_h100x4_nvlink.txt").read_text(), "")  # 4 ranks where 8 were asked
    short = V.validate(load_text(spec, "cluster.yaml"), run=runner(**{MPI: four}))
    assert checks(short)["nccl across nodes"][1].startswith("gpu[01-02]: 4 ranks ran, 8 GPUs were asked for")


def test_the_mpi_build_is_made_only_when_asked():
    from corral.render.acceptance import nccl_tests_build_script, nccl_tests_mark
    from corral.spec.models_acceptance import NcclSpec
    plain, mpi = NcclSpec(enabled=True, sha256=SUM), NcclSpec(enabled=True, sha256=SUM, across_nodes=True)
    assert "MPI=1" not in nccl_tests_build_script(plain, "12.4", "h100")
    script = nccl_tests_build_script(mpi, "12.4", "h100")
    assert 'MPI=1 MPI_HOME="/usr/lib/$(gcc -print-multiarch)/openmpi"' in script and "all_reduce_perf_mpi" in script
    assert nccl_tests_mark(plain, "12.4", "h100", "2.21") == "nccl-tests 2.17.10 cuda 12.4 compute 90 nccl 2.21\n"
    assert nccl_tests_mark(mpi, "12.4", "h100", "2.21").endswith("nccl 2.21 mpi\n")
