"""`corral validate`'s verdicts without a cluster: its one seam, `run(node, command, ...)`, answered with
captured Slurm output (tests/fixtures/slurm*, and srun/sacct/munge lines in the shapes those print)."""

from __future__ import annotations

import subprocess
from types import SimpleNamespace

import pytest

import corral.checks.jobs as J
import corral.checks.validate as V
from corral.errors import NodeError
from corral.render.ctld_restart import JUDGE
from corral.spec.loader import load_text
from tests.unit.validate_capture import (CRED, GPU01, GPU02_DRAINED, GPU02_IDLE, GPU_SRUN, PING_DOWN, SHOWN,
                                         SPEC, Captured)

@pytest.fixture
def cluster():
    return load_text(SPEC, "cluster.yaml")


@pytest.fixture(autouse=True)
def no_waiting(monkeypatch):
    monkeypatch.setattr(V, "time", SimpleNamespace(sleep=lambda s: None))  # sacct is polled
    monkeypatch.setattr(J, "monotonic", lambda: 1000.0)                   # the job phase's clock stands


def checks(report) -> dict[str, tuple[str, str]]:
    return {c.name: (c.status, c.message) for c in report.checks}


def test_a_healthy_cluster_is_ok_with_the_deepops_fields(cluster):
    run = Captured()
    report = V.validate(cluster, run=run)
    data = report.to_json()
    assert report.ok and data["failures"] == []
    assert list(data) == ["ok", "failures", "slurm_version", "controller_reachable", "nodes_total", "nodes_available",
                          "gpus_configured", "gpu_job_ok", "acceptance", "checks"]
    assert {k: data[k] for k in list(data)[2:8]} == {
        "slurm_version": "22.05.8", "controller_reachable": True, "nodes_total": 2, "nodes_available": 2,
        "gpus_configured": 8, "gpu_job_ok": True}
    assert checks(report) == {
        "controller reachable": ("OK", "slurmctld on ctl is up (Slurm 22.05.8)"),
        "slurmctld restarts": ("OK", "no unclean end of slurmctld in its log on ctl"),
        "nodes available": ("OK", "2/2 compute nodes available"),
        "gres": ("OK", "configured GRES equals the spec on every node"),
        "nodes reachable": ("OK", "2/2 compute nodes reachable, slurmd and munge active, responding in Slurm"),
        "gpu job": ("OK", "every compute node ran a GPU job seeing exactly its GPUs"),
        "multi-node job": ("OK", "2 nodes: gpu01, gpu02"),
        "job accounted": ("OK", "job 4242 recorded: 4242|COMPLETED|root"),
        "user job": ("SKIPPED", "no login node in the spec"),
        "munge": ("OK", "every node decodes the controller's munge credential"),
        "dcgm diag": ("OK", "dcgm diag: every GPU compute node passed"),
        "gpu burn": ("SKIPPED", "acceptance.burn.enabled is false"),
        "nccl all-reduce": ("SKIPPED", "acceptance.nccl.enabled is false")}
    assert data["acceptance"]["dcgm_diag"]["gpu01"] == {"level": 1, "version": "4.1.1", "fail": [], "warn": []}
    assert report.checks[4].nodes == {"gpu01": "OK: slurmd and munge active; Slurm: IDLE",
                                      "gpu02": "OK: slurmd and munge active; Slurm: IDLE"}
    # every compute node asked (bounded) whether slurmd and munge run, before any job
    assert sorted((n, c) for n, c, _ in run.calls if n != "ctl") == [
        ("gpu01", "systemctl is-active slurmd munge"), ("gpu01", "unmunge"),
        ("gpu02", "systemctl is-active slurmd munge"), ("gpu02", "unmunge")]
    assert run.timeouts["systemctl is-active slurmd munge"] == 10
    gpu = ("timeout -k 5 65 srun -J corral-validate --immediate=60 -t 1 -N2 --ntasks-per-node=1 -w 'gpu[01-02]' "
           "--gres=gpu:4 bash -c 'echo \"$(hostname) $SLURM_JOB_ID $CUDA_VISIBLE_DEVICES "
           "$(nvidia-smi -L | grep -c '\"'\"'^GPU '\"'\"')\"'")
    multi = ("timeout -k 5 65 srun -J corral-validate --immediate=60 -t 1 -N2 -w 'gpu[01-02]' "
             "bash -c 'echo $SLURM_JOB_ID $(hostname)'")
    diag = ("timeout -k 5 335 srun -J corral-validate --immediate=30 -t 6 -N1 -w {} --exclusive --gres=gpu:4 "
            "bash -c 'dcgmi diag -r 1 -j'")
    sent = run.sent("ctl")
    assert sent[:3] == ["scontrol ping; scontrol version", JUDGE, "scontrol show node -o"]
    # the jobs and munge's check at once: each in its own order
    assert sorted(sent[3:8]) == sorted([gpu, multi, "sacct -n -X -P -j 4242 -o JobID,State,Account", "munge -n",
                                        "unmunge"])
    assert sent.index(multi) < sent.index("sacct -n -X -P -j 4242 -o JobID,State,Account")
    assert sent.index("munge -n") < sent.index("unmunge")
    assert sorted(sent[8:10]) == [diag.format("gpu01"), diag.format("gpu02")]  # the nodes' diagnostics in parallel
    assert sent[10:] == ["scancel --name=corral-validate --user=root"]
    assert run.timeouts[diag.format("gpu01")] == 345  # 30 s to start, level 1's 300 s, 15 s for SSH and teardown
    assert run.timeouts[gpu] == run.timeouts[multi] == 75  # the job phase's 60 s + 15 s for SSH and teardown
    # the controller's credential goes to every node's unmunge on stdin
    assert sorted((n, i) for n, c, i in run.calls if c == "unmunge") == [("ctl", CRED), ("gpu01", CRED), ("gpu02", CRED)]


def test_a_drained_node_fails_naming_the_node_and_its_reason(cluster):
    run = Captured(**{"scontrol show node -o": (0, "\n".join([GPU01, GPU02_DRAINED, SHOWN[2]]) + "\n", "")})
    report = V.validate(cluster, jobs=False, run=run)
    assert not report.ok and report.extra["nodes_available"] == 1
    status, message = checks(report)["nodes available"]
    assert status == "FAIL" and message == "gpu02: IDLE+DRAIN (corral: gpu count 3 < 4 [root@2026-12-02T16:50:01])"
    assert report.failures == [f"nodes available: {message}"]
    assert checks(report)["jobs"] == ("SKIPPED", "--skip-jobs: read-only run")
    assert not any(w in c for _, c, _ in run.calls for w in ("srun", "sacct", "scancel"))  # --skip-jobs: no job


def test_a_node_missing_from_slurm_fails_both_node_checks(cluster):
    report = V.validate(cluster, jobs=False, run=Captured(**{"scontrol show node -o": (0, GPU01 + "\n", "")}))
    assert checks(report)["nodes available"] == ("FAIL", "gpu02: not known to Slurm")
    assert checks(report)["gres"] == ("FAIL", "gpu02: not known to Slurm")


def test_a_gres_mismatch_fails(cluster):
    fewer = GPU02_IDLE.replace("Gres=gpu:h100:4", "Gres=gpu:h100:2")
    report = V.validate(cluster, jobs=False, run=Captured(**{"scontrol show node -o": (0, f"{GPU01}\n{fewer}\n", "")}))
    assert checks(report)["gres"] == ("FAIL", "gpu02: GRES gpu:h100:2, spec says gpu:h100:4")
    assert checks(report)["nodes available"][0] == "OK" and report.extra["gpus_configured"] == 6
    assert not report.ok and report.to_json()["failures"] == ["gres: gpu02: GRES gpu:h100:2, spec says gpu:h100:4"]


def test_a_gpu_job_seeing_the_wrong_gpus_fails(cluster):
    wrong = "gpu01 4241 0,1,2,3 4\ngpu02 4241 0,1 2\n"
    report = V.validate(cluster, run=Captured(**{GPU_SRUN: (0, wrong, "")}))
    assert checks(report)["gpu job"] == ("FAIL", "gpu02: asked 4 GPUs: CUDA_VISIBLE_DEVICES=0,1, nvidia-smi sees 2")
    assert report.extra["gpu_job_ok"] is False and not report.ok


def test_a_gpu_job_that_did_not_run_on_a_node_fails_with_srun_s_error(cluster):
    err = "srun: error: Unable to allocate resources: Requested node configuration is not available\n"
    report = V.validate(cluster, run=Captured(**{GPU_SRUN: (1, "", err)}))
    status, message = checks(report)["gpu job"]
    assert status == "FAIL" and message.startswith("gpu01: GPU job failed (rc=1): srun: error: Unable to allocate")


def test_a_job_not_completed_in_sacct_fails(cluster):
    run = Captured(sacct_=(0, "4242|RUNNING|root\n", ""))
    report = V.validate(cluster, run=run)
    assert checks(report)["job accounted"] == (
        "FAIL", "job 4242 not recorded as COMPLETED by slurmdbd (sacct: 4242|RUNNING|root)")
    assert sum(c.startswith("sacct ") for _, c, _ in run.calls) == 30  # polled, then given up
    assert report.to_json()["ok"] is False


def test_no_accounting_record_at_all_fails_saying_nothing(cluster):
    report = V.validate(cluster, run=Captured(sacct_=(0, "", "")))
    assert checks(report)["job accounted"] == (
        "FAIL", "job 4242 not recorded as COMPLETED by slurmdbd (sacct: nothing)")


def test_a_controller_that_is_down_fails_with_controller_reachable_false(cluster):
    run = Captured(**{"scontrol ping; scontrol version": (1, PING_DOWN, "")})
    data = V.validate(cluster, run=run).to_json()
    assert data["ok"] is False and data["controller_reachable"] is False and data["slurm_version"] is None
    assert data["failures"][0].startswith("controller reachable: slurmctld on ctl not reachable: "
                                          "Slurmctld(primary) at ctl is DOWN")
    assert [c["name"] for c in data["checks"]] == ["controller reachable"]  # nothing else asked of a dead controller
    assert [c for _, c, _ in run.calls] == ["scontrol ping; scontrol version"]


def test_a_controller_that_cannot_be_reached_at_all_fails_the_same_way(cluster):
    gone = NodeError("command timed out after 30 s", node="ctl", command="scontrol ping; scontrol version")
    data = V.validate(cluster, run=Captured(**{"scontrol ping; scontrol version": gone})).to_json()
    assert data["controller_reachable"] is False and data["ok"] is False
    assert "slurmctld on ctl not reachable: " in data["failures"][0] and "timed out" in data["failures"][0]


def test_munge_failing_on_a_node_fails(cluster):
    class Bad(Captured):
        def __call__(self, node, command, **kw):
            if command == "unmunge" and node == "gpu02":
                return subprocess.CompletedProcess(command, 1, "", "unmunge: Error: Invalid credential\n")
            return super().__call__(node, command, **kw)
    report = V.validate(cluster, jobs=False, run=Bad())
    assert checks(report)["munge"] == ("FAIL", "gpu02: unmunge failed: ['unmunge: Error: Invalid credential']")


def test_the_default_runner_is_ssh_through_run_on(cluster, monkeypatch):
    sent = []
    monkeypatch.setattr(V, "run_on", lambda c, node, command, **kw: sent.append((c, node, command, kw))
                        or subprocess.CompletedProcess(command, 0, PING_DOWN, ""))
    assert V.validate(cluster).extra["controller_reachable"] is False
    assert sent == [(cluster, "ctl", "scontrol ping; scontrol version", {"timeout": 30})]
