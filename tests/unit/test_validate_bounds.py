"""validate is bounded and always gives a verdict (through its seam, on captured output): a node whose
slurmd is down or that cannot be reached is named by the reachability pass and gets no job; a job that
cannot start or finish, a command that times out, any CorralError become FAIL checks naming the node;
every corral-validate job is cancelled on the way out, KeyboardInterrupt included; and
`corral validate --json` prints one JSON object whatever went wrong."""

from __future__ import annotations

import json
import subprocess
import time
from types import SimpleNamespace

import pytest

import corral.checks.jobs as J
import corral.checks.reach as R
import corral.checks.validate as V
from corral.cli.main import main
from corral.errors import CorralError, NodeError
from corral.spec.loader import load_text
from tests.unit.validate_capture import GPU01, GPU_SRUN, MULTI_SRUN, SPEC, Captured

SPEC3 = SPEC.replace("gpu[01-02]", "gpu[01-03]").replace("10.0.0.[11-12]", "10.0.0.[11-13]")
GPU03_IDLE = GPU01.replace("gpu01", "gpu03").replace("10.213.0.11", "10.213.0.13")
GPU02_IDLE = GPU01.replace("gpu01", "gpu02").replace("10.213.0.11", "10.213.0.12")
SHOW3 = (0, "\n".join([GPU01, GPU02_IDLE, GPU03_IDLE]) + "\n", "")
CANCEL = "scancel --name=corral-validate --user=root"
TIMED_OUT = NodeError("command timed out after 75 s", node="ctl", command="timeout -k 5 65 srun -J corral-validate")


@pytest.fixture(autouse=True)
def no_waiting(monkeypatch):
    monkeypatch.setattr(V, "time", SimpleNamespace(sleep=lambda s: None))  # sacct is polled
    monkeypatch.setattr(J, "monotonic", lambda: 1000.0)                   # the job phase's clock stands


@pytest.fixture
def cluster():
    return load_text(SPEC, "cluster.yaml")


def checks(report) -> dict[str, tuple[str, str]]:
    return {c.name: (c.status, c.message) for c in report.checks}


def srun_sent(run) -> list[str]:
    """The job phase's sruns (--timeout); not the acceptance jobs (--exclusive, bounds of their own)."""
    return [c for c in run.sent("ctl") if " srun " in c and " --exclusive " not in c]


# --- the reachability pass ---------------------------------------------------------------------


def test_a_node_with_slurmd_stopped_is_named_and_gets_no_job_the_others_run_theirs():
    cluster = load_text(SPEC3, "cluster.yaml")
    run = Captured(nodes={"gpu02": {"systemctl is-active slurmd munge": (3, "inactive\nactive\n", "")}},
                   **{"scontrol show node -o": SHOW3,
                      GPU_SRUN: (0, "gpu01 4241 0,1,2,3 4\ngpu03 4241 0,1,2,3 4\n", ""),
                      MULTI_SRUN: (0, "4242 gpu01\n4242 gpu03\n", "")})
    report = V.validate(cluster, run=run)
    got = checks(report)
    assert got["nodes reachable"] == ("FAIL", "gpu02: slurmd not running (inactive)")
    assert got["gpu job"] == ("FAIL", "gpu02: not tested (slurmd not running)")
    assert report.checks[[c.name for c in report.checks].index("gpu job")].nodes == {
        "gpu01": "OK: asked 4 GPUs: CUDA_VISIBLE_DEVICES=0,1,2,3, nvidia-smi sees 4",
        "gpu02": "FAIL: not tested (slurmd not running)",
        "gpu03": "OK: asked 4 GPUs: CUDA_VISIBLE_DEVICES=0,1,2,3, nvidia-smi sees 4"}
    assert got["multi-node job"] == ("OK", "2 nodes: gpu01, gpu03; gpu02: not tested (slurmd not running)")
    assert got["job accounted"][0] == "OK" and not report.ok
    assert [s.split(" bash -c ")[0].split(" -t 1 ")[1] for s in srun_sent(run)] == [
        "-N2 --ntasks-per-node=1 -w 'gpu[01,03]' --gres=gpu:4", "-N2 -w 'gpu[01,03]'"]
    assert run.sent("ctl")[-1] == CANCEL


@pytest.mark.parametrize(("answer", "message"), [
    ((3, "active\nfailed\n", ""), "gpu02: munge not running (failed)"),
    ((3, "inactive\ninactive\n", ""), "gpu02: slurmd not running (inactive), munge not running (inactive)"),
    ((255, "", "ssh: connect to host 10.0.0.12 port 22: No route to host\n"),
     "gpu02: unreachable (ssh: connect to host 10.0.0.12 port 22: No route to host)"),
    ((1, "", "sudo: a password is required\n"),
     "gpu02: cannot tell whether slurmd and munge run (rc=1: sudo: a password is required)"),
])
def test_what_the_pass_says_of_a_node(cluster, answer, message):
    run = Captured(nodes={"gpu02": {"systemctl is-active slurmd munge": answer}})
    report = V.validate(cluster, jobs=False, run=run)
    assert checks(report)["nodes reachable"] == ("FAIL", message)


def test_a_node_slurm_sees_not_responding_is_named_with_its_state_and_gets_no_job(cluster):
    run = Captured(**{"scontrol show node -o": (0, f"{GPU01}\n{GPU02_IDLE.replace('State=IDLE', 'State=IDLE*')}\n", "")})
    report = V.validate(cluster, run=run)
    assert checks(report)["nodes reachable"] == ("FAIL", "gpu02: not responding in Slurm (IDLE*)")
    assert checks(report)["nodes available"] == ("FAIL", "gpu02: IDLE*")
    assert checks(report)["multi-node job"][1].startswith("not run: 2 nodes needed, 1 passed the reachability "
                                                          "pass; gpu02: not tested (not responding in Slurm)")
    assert all("gpu02" not in s and "gpu[" not in s for s in srun_sent(run))


def test_an_unreachable_node_is_named_within_the_bound_and_asked_nothing_more(cluster, monkeypatch):
    """The runner raises for gpu02 once its (short) timeout has passed: the pass takes about that bound,
    the nodes in parallel, and gpu02 is in no job and no unmunge."""
    monkeypatch.setattr(R, "TIMEOUT_S", 0.3)

    class Gone(Captured):
        def __call__(self, node, command, *, timeout=120, input=None):
            if node == "gpu02":
                self.calls.append((node, command, input))
                time.sleep(timeout)
                raise NodeError(f"command timed out after {timeout:.0f} s", node=node, command=command)
            if command.startswith("systemctl"):
                time.sleep(0.2)
            return super().__call__(node, command, timeout=timeout, input=input)
    run = Gone(**{GPU_SRUN: (0, "gpu01 4241 0,1,2,3 4\n", ""), "-N1 -w ": (0, "4242 gpu01\n", "")})
    start = time.monotonic()
    report = V.validate(cluster, run=run)
    assert time.monotonic() - start < 2
    got = checks(report)
    assert got["nodes reachable"] == ("FAIL", "gpu02: unreachable (gpu02: command timed out after 0 s)")
    assert got["gpu job"] == ("FAIL", "gpu02: not tested (unreachable)")
    assert got["munge"] == ("FAIL", "gpu02: not tested (unreachable)")
    assert run.sent("gpu02") == ["systemctl is-active slurmd munge"]
    assert not report.ok and run.sent("ctl")[-1] == CANCEL


def test_an_unreachable_node_raising_a_corral_error_of_any_kind_is_named(cluster):
    run = Captured(nodes={"gpu02": {"systemctl is-active slurmd munge": CorralError("no route to gpu02"),
                                    "unmunge": AssertionError("gpu02 must not be asked again")}})
    report = V.validate(cluster, jobs=False, run=run)
    assert checks(report)["nodes reachable"] == ("FAIL", "gpu02: unreachable (no route to gpu02)")


# --- bounds: jobs that cannot start or finish, commands that time out -----------------------------


def test_every_job_is_named_bounded_by_timeout_s_and_the_runner_waits_a_little_longer(cluster):
    run = Captured()
    V.validate(cluster, run=run, timeout_s=20)
    gpu, multi = srun_sent(run)
    for cmd in (gpu, multi):
        assert cmd.startswith("timeout -k 5 25 srun -J corral-validate --immediate=20 -t 1 ")
        assert run.timeouts[cmd] == 35


def test_a_job_that_cannot_start_is_reported_per_node(cluster):
    busy = "srun: job 4243 queued and waiting for resources\nsrun: error: Unable to allocate resources: " \
           "Requested nodes are busy\n"
    report = V.validate(cluster, run=Captured(**{GPU_SRUN: (1, "", busy)}))
    assert checks(report)["gpu job"] == ("FAIL", "gpu01: job did not start within 60 s (cancelled); "
                                                 "gpu02: job did not start within 60 s (cancelled)")


def test_a_job_that_starts_and_hangs_is_ended_on_the_controller_and_reported(cluster):
    hung = "srun: job 4243 queued and waiting for resources\nsrun: job 4243 has been allocated resources\n"
    report = V.validate(cluster, run=Captured(**{GPU_SRUN: (124, "gpu01 4243 0,1,2,3 4\n", hung)}))
    assert checks(report)["gpu job"] == ("FAIL", "gpu02: GPU job started but did not finish within 60 s (ended)")


def test_a_timeout_on_the_srun_is_a_fail_check_and_the_jobs_are_cancelled(cluster):
    run = Captured(**{GPU_SRUN: TIMED_OUT, MULTI_SRUN: TIMED_OUT})
    report = V.validate(cluster, run=run)
    got = checks(report)
    assert got["gpu job"] == ("FAIL", "gpu01: GPU job: srun: ctl: command timed out after 75 s; "
                                      "gpu02: GPU job: srun: ctl: command timed out after 75 s")
    assert got["multi-node job"] == ("FAIL", "srun: ctl: command timed out after 75 s")
    assert got["job accounted"] == ("SKIPPED", "no job ran") and got["munge"][0] == "OK"
    assert report.extra["gpu_job_ok"] is False and not report.ok
    assert run.sent("ctl")[-1] == CANCEL


def test_the_job_phase_stops_at_its_bound(cluster, monkeypatch):
    clock = iter([0.0, 10.0, 61.0, 61.0, 61.0, 61.0, 61.0, 61.0])  # the deadline, the GPU job, then past it
    monkeypatch.setattr(J, "monotonic", lambda: next(clock))
    run = Captured()
    report = V.validate(cluster, run=run)
    got = checks(report)
    assert got["gpu job"][0] == "OK"
    assert got["multi-node job"] == ("FAIL", "not run: the job phase's bound (60 s, --timeout) was reached")
    assert len(srun_sent(run)) == 1 and "--immediate=50 " in srun_sent(run)[0]
    assert run.sent("ctl")[-1] == CANCEL


def test_any_corral_error_inside_becomes_a_validate_check_and_the_jobs_are_cancelled(cluster, monkeypatch):
    def boom(*a, **kw):
        raise NodeError("command timed out after 30 s", node="ctl", command="sinfo -h")
    monkeypatch.setattr(V, "multi_node", boom)
    run = Captured()
    report = V.validate(cluster, run=run)
    assert checks(report)["validate"] == ("FAIL", "ctl: command timed out after 30 s (running: sinfo -h)")
    assert "validate: ctl: command timed out after 30 s (running: sinfo -h)" in report.failures
    assert run.sent("ctl")[-1] == CANCEL


def test_scontrol_show_node_timing_out_is_named_and_no_job_is_sent(cluster):
    run = Captured(**{"scontrol show node -o": NodeError("command timed out after 30 s", node="ctl")})
    report = V.validate(cluster, run=run)
    assert checks(report)["nodes available"] == ("FAIL", "scontrol show node: ctl: command timed out after 30 s")
    assert checks(report)["gpu job"] == ("FAIL", "gpu01: not tested (not known to Slurm); "
                                                 "gpu02: not tested (not known to Slurm)")
    assert srun_sent(run) == [] and run.sent("ctl")[-1] == CANCEL


# --- the cancel on every way out ------------------------------------------------------------------


def test_keyboard_interrupt_mid_job_cancels_then_propagates(cluster):
    run = Captured(**{MULTI_SRUN: KeyboardInterrupt()})
    with pytest.raises(KeyboardInterrupt):
        V.validate(cluster, run=run)
    sent = run.sent("ctl")
    assert sent[-1] == CANCEL and MULTI_SRUN in " ".join(srun_sent(run))  # munge's check may run beside the jobs


def test_the_spec_users_job_is_cancelled_as_that_user_and_a_failed_cancel_is_a_fail():
    spec = (SPEC.replace("roles: [controller, accounting]", "roles: [controller, accounting, nfs]")
            + "  - {names: login1, addresses: [10.0.0.20], roles: [login]}\n"
            + "storage:\n  exports: [{path: /srv/nfs/home}]\n  mounts: [{path: /home, export: /srv/nfs/home}]\n"
            + "users:\n  - {name: alice, uid: 2001}\n")
    cluster = load_text(spec, "cluster.yaml")
    mark = "@@corral-user-job"
    run = Captured(nodes={"login1": {"runuser ": (0, f"{mark} RC 0\n{mark} JOB 17\n{mark} FILE alice gpu01 alice\n", "")}},
                   **{"scancel ": (1, "", "scancel: error: Invalid user name: alice\n")})
    report = V.validate(cluster, run=run)
    assert checks(report)["user job"][0] == "OK", checks(report)["user job"]
    assert run.sent("ctl")[-1] == f"{CANCEL}; scancel --name=corral-validate --user=alice"
    assert checks(report)["jobs cancelled"] == ("FAIL", "scancel --name=corral-validate on ctl (rc=1): "
                                                        "scancel: error: Invalid user name: alice")
    assert not report.ok


def test_skip_jobs_and_a_dead_controller_cancel_nothing(cluster):
    run = Captured()
    V.validate(cluster, jobs=False, run=run)
    assert not any("scancel" in c for c in run.sent())


# --- the CLI: one JSON object, whatever went wrong ----------------------------------------------


@pytest.fixture
def spec_file(tmp_path):
    path = tmp_path / "cluster.yaml"
    path.write_text(SPEC)
    return path


def _json(capsys) -> tuple[dict, str]:
    out = capsys.readouterr()
    return json.loads(out.out), out.err


def test_cli_json_on_a_timed_out_srun_is_one_object_exit_1(spec_file, capsys, monkeypatch):
    run = Captured(**{GPU_SRUN: TIMED_OUT})
    monkeypatch.setattr(V, "run_on", lambda c, node, command, **kw: run(node, command, **kw))
    assert main(["validate", "-f", str(spec_file), "--json"]) == 1
    data, err = _json(capsys)
    assert data["ok"] is False and data["controller_reachable"] is True and data["gpu_job_ok"] is False
    assert "gpu job: gpu01: GPU job: srun: ctl: command timed out after 75 s" in data["failures"][0]
    assert err == "" and run.sent("ctl")[-1] == CANCEL


@pytest.mark.parametrize("where", ["scontrol ping; scontrol version", "scontrol show node -o",
                                   "systemctl is-active slurmd munge", MULTI_SRUN, "sacct ", "munge -n", "scancel "])
def test_cli_json_with_a_corral_error_at_any_point(spec_file, capsys, monkeypatch, where):
    run = Captured(**{where: CorralError(f"gave up at {where.strip()}")})
    monkeypatch.setattr(V, "run_on", lambda c, node, command, **kw: run(node, command, **kw))
    assert main(["validate", "-f", str(spec_file), "--json"]) == 1
    data, err = _json(capsys)
    assert list(data)[:2] == ["ok", "failures"] and data["ok"] is False and "checks" in data
    assert any(f"gave up at {where.strip()}" in f for f in data["failures"]), data["failures"]
    assert err == ""


def test_cli_json_when_validate_itself_raises(spec_file, capsys, monkeypatch):
    def boom(cluster, **kw):
        raise CorralError("lost the controller", where="ctl")
    monkeypatch.setattr(V, "validate", boom)
    assert main(["validate", "-f", str(spec_file), "--json"]) == 1
    data, _ = _json(capsys)
    assert data["ok"] is False and data["failures"] == ["validate: ctl: lost the controller"]
    assert data["nodes_total"] == 2 and data["controller_reachable"] is False


def test_cli_json_on_a_bug_is_still_one_object_then_the_short_bug_line(spec_file, capsys, monkeypatch):
    def bug(cluster, **kw):
        raise ZeroDivisionError("oops")
    monkeypatch.setattr(V, "validate", bug)
    assert main(["validate", "-f", str(spec_file), "--json"]) == 1
    data, err = _json(capsys)
    assert data["failures"] == ["validate: internal error (ZeroDivisionError: oops)"]
    assert "this is a bug in corral" in err and "Traceback (most recent call last)" not in err


def test_cli_spec_error_is_exit_2_with_the_object_on_stdout(tmp_path, capsys):
    path = tmp_path / "cluster.yaml"
    path.write_text(SPEC.replace("count: 4", "cuont: 4"))
    assert main(["validate", "-f", str(path), "--json"]) == 2
    data, err = _json(capsys)
    assert data["ok"] is False and "cuont" in data["failures"][0] and "cuont" in err


def test_cli_passes_timeout_and_refuses_a_zero_one(spec_file, capsys, monkeypatch):
    seen = {}

    def fake(cluster, **kw):
        seen.update(kw)
        return V.Report(extra=V.contract(2))
    monkeypatch.setattr(V, "validate", fake)
    assert main(["validate", "-f", str(spec_file), "--timeout", "20", "--skip-jobs"]) == 0
    assert seen == {"jobs": False, "timeout_s": 20, "fabric": False}
    assert main(["validate", "-f", str(spec_file), "--skip-jobs", "--fabric"]) == 0 and seen["fabric"] is True
    assert main(["validate", "-f", str(spec_file), "--timeout", "0"]) == 2


def test_cli_text_mode_names_the_failure_and_exits_1(spec_file, capsys, monkeypatch):
    run = Captured(nodes={"gpu02": {"systemctl is-active slurmd munge": (3, "inactive\nactive\n", "")}})
    monkeypatch.setattr(V, "run_on", lambda c, node, command, **kw: run(node, command, **kw))
    assert main(["validate", "-f", str(spec_file), "--skip-jobs"]) == 1
    assert "FAIL    nodes reachable: gpu02: slurmd not running (inactive)" in capsys.readouterr().out


def test_the_probe_runs_through_the_seam_to_run_on_with_its_bound(cluster, monkeypatch):
    sent = []

    def fake(c, node, command, **kw):
        sent.append((node, command, kw))
        return subprocess.CompletedProcess(command, 0, "active\nactive\n", "")
    monkeypatch.setattr(V, "run_on", fake)
    assert R.probe(V.remote(cluster), "gpu01") == ("OK", "slurmd and munge active", "")
    assert sent == [("gpu01", "systemctl is-active slurmd munge", {"timeout": 10})]
