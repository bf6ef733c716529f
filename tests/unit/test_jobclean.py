"""The epilog's clean-up (node/jobclean.py) without a node: nvidia-smi's compute apps parsed (and the
virtual cluster's stand-in answering the same query), the drain reason, a user's leftovers found in a
/proc of files and ended for real (a child process), and the epilog's decisions through a `run` seam."""

from __future__ import annotations

import json
import subprocess
import types
from importlib import resources
from pathlib import Path

import pytest

from corral.node import jobclean
from corral.node.health_slurm import RESUME, decide

UUIDS = "0, GPU-aaa\n1, GPU-bbb\n"


def test_compute_apps_and_gpu_uuids_are_parsed_and_matched_to_the_jobs_gpus():
    apps = jobclean.parse_compute_apps("4242, GPU-bbb\n17, GPU-aaa\nnot a line\n99, GPU-zzz\n")
    assert apps == [(4242, "GPU-bbb"), (17, "GPU-aaa"), (99, "GPU-zzz")]
    uuids = jobclean.parse_gpu_uuids(UUIDS)
    assert jobclean.stuck_on(apps, uuids, [1]) == {1: [4242]}
    assert jobclean.stuck_on(apps, uuids, [2]) == {}


def test_the_drain_reason_names_ids_only_bounded_and_health_leaves_it_to_an_admin():
    reason = jobclean.drain_reason("77", {0: [4242, 17], 3: [5]})
    assert reason == ("corral: GPU processes left after job 77: GPU 0 pid 17,4242; GPU 3 pid 5; "
                      "an admin checks the node, then resumes it")
    assert len(jobclean.drain_reason("1", {i: list(range(50)) for i in range(8)})) == jobclean.MAX_REASON
    node = {"state": "IDLE+DRAIN", "base": "IDLE", "flags": {"DRAIN"}, "reason": reason}
    assert decide(node, [("gpu", "PASS", "ok")])[0] != RESUME


def _proc(root: Path, pid: int, uid: int, cgroup: str) -> None:
    d = root / str(pid)
    d.mkdir()
    (d / "status").write_text(f"Name:\tx\nUid:\t{uid}\t{uid}\t{uid}\t{uid}\n")
    (d / "cgroup").write_text(cgroup)


def test_leftovers_are_the_users_processes_outside_every_other_job(tmp_path):
    _proc(tmp_path, 10, 2001, "4:freezer:/\n1:name=systemd:/user.slice/session-3.scope\n")
    _proc(tmp_path, 11, 2001, "4:freezer:/slurm/uid_2001/job_8/step_0\n")   # her other job: kept
    _proc(tmp_path, 12, 2001, "4:freezer:/slurm/uid_2001/job_7/step_batch\n")  # the ending job's own
    _proc(tmp_path, 13, 2002, "4:freezer:/\n")  # someone else
    (tmp_path / "self").mkdir()
    assert jobclean.leftovers(2001, "7", proc=str(tmp_path)) == [10, 12]


def test_end_processes_ends_a_real_process():
    child = subprocess.Popen(["sleep", "100"])
    try:
        assert jobclean.end_processes([child.pid], grace_s=5) == []  # SIGTERM was enough
        assert child.wait(timeout=5) == -15
    finally:
        child.kill()
    stubborn = subprocess.Popen(["sh", "-c", "trap '' TERM; echo ready; while :; do sleep 0.1; done"],
                                stdout=subprocess.PIPE, text=True)
    try:
        assert stubborn.stdout.readline() == "ready\n"  # SIGTERM ignored from here on
        assert jobclean.end_processes([stubborn.pid], grace_s=0.5) == [stubborn.pid]  # then SIGKILL
        assert stubborn.wait(timeout=5) == -9
    finally:
        stubborn.kill()


def test_end_processes_signals_only_the_processes_it_listed():
    """Security review 3, N15: signals go through pidfds opened before the first one, each process checked to be
    the user's; another user's process (here: a uid that is not this one's) is never signalled."""
    import os
    child = subprocess.Popen(["sleep", "100"])
    try:
        assert jobclean.end_processes([child.pid], grace_s=1, uid=os.getuid() + 1) == []
        assert child.poll() is None  # not the listed user's: left alone
        assert jobclean.end_processes([child.pid], grace_s=5, uid=os.getuid()) == []
        assert child.wait(timeout=5) == -15
    finally:
        child.kill()
    gone = subprocess.Popen(["true"])
    gone.wait()
    assert jobclean.end_processes([gone.pid], grace_s=1) == []  # reaped: nothing to signal, nothing raised


class Run:
    """The `run` seam: nvidia-smi's answers, scontrol's calls recorded."""

    def __init__(self, apps: str, uuids: str = UUIDS, scontrol_rc: int = 0):
        self.apps, self.uuids, self.rc, self.calls = apps, uuids, scontrol_rc, []

    def __call__(self, argv, **kwargs):
        self.calls.append(argv)
        assert kwargs.get("timeout"), argv  # every command bounded
        out = (self.uuids if "--query-gpu=index,uuid" in argv else self.apps if argv[0] == "nvidia-smi" else "")
        return types.SimpleNamespace(returncode=self.rc if argv[0] == "scontrol" else 0, stdout=out, stderr="")


ENV = {"SLURM_JOB_ID": "77", "SLURMD_NODENAME": "gpu01", "SLURM_JOB_UID": "2001"}


@pytest.fixture
def gpu_node(monkeypatch):
    real = jobclean.os.path.exists
    monkeypatch.setattr(jobclean.os.path, "exists", lambda p: True if p == "/dev/nvidiactl" else real(p))
    monkeypatch.setattr(jobclean, "leftovers", lambda uid, job: [])
    monkeypatch.setattr(jobclean, "off_job", lambda pid: None)  # /proc shows none of the fixture's pids


def test_a_stuck_gpu_process_drains_the_node(gpu_node):
    run = Run("4242, GPU-bbb\n")
    said = jobclean.epilog({"end_leftovers": True, "gpu_settle_s": 0}, ENV, [1], lambda *a: [], run)
    drain = [c for c in run.calls if c[0] == "scontrol"]
    assert drain == [["scontrol", "update", "NodeName=gpu01", "State=DRAIN",
                      "Reason=corral: GPU processes left after job 77: GPU 1 pid 4242; an admin checks the node, "
                      "then resumes it"]]
    assert said[-1].startswith("drained gpu01")


@pytest.mark.attack
def test_a_users_gpu_process_outside_any_job_is_ended_not_drained_for(gpu_node, monkeypatch):
    """Security review 3, N7: a cron entry of a user's holding the job's GPU after the job: ended (pid and uid
    said), and the node stays up; what is left after that still drains."""
    ended = []
    monkeypatch.setattr(jobclean, "off_job", lambda pid: 3001 if pid == 4242 else None)

    def end(pids, **kw):
        ended.append((pids, kw.get("uid")))
        run.apps = ""  # gone: nvidia-smi lists nothing now
        return []
    monkeypatch.setattr(jobclean, "end_processes", end)
    run = Run("4242, GPU-bbb\n")
    said = jobclean.epilog({"end_leftovers": True, "gpu_settle_s": 0}, ENV, [1], lambda *a: [], run)
    assert ended == [([4242], 3001)] and said == ["ended GPU process(es) outside any job: pid 4242 uid 3001"]
    assert not [c for c in run.calls if c[0] == "scontrol"]
    run = Run("4242, GPU-bbb\n4343, GPU-bbb\n")  # 4343: root's, or another job's: still drains
    monkeypatch.setattr(jobclean, "end_processes", lambda pids, **kw: ended.append((pids, kw.get("uid"))) or [])
    said = jobclean.epilog({"gpu_settle_s": 0}, ENV, [1], lambda *a: [], run)
    assert said[-1].startswith("drained gpu01") and [c for c in run.calls if c[0] == "scontrol"]


def test_off_job_names_only_a_users_process_in_no_job(tmp_path):
    for pid, uid, cgroup in ((10, 2001, "0::/system.slice/cron.service\n"), (11, 2001, "4:freezer:/slurm/uid_2001/job_7/step_0\n"),
                             (12, 0, "0::/system.slice/cron.service\n"), (13, 64030, "0::/system.slice/x\n")):
        (tmp_path / str(pid)).mkdir()
        (tmp_path / str(pid) / "status").write_text(f"Name:\tx\nUid:\t{uid}\t{uid}\t{uid}\t{uid}\n")
        (tmp_path / str(pid) / "cgroup").write_text(cgroup)
    assert [jobclean.off_job(p, proc=str(tmp_path)) for p in (10, 11, 12, 13, 14)] == [2001, None, None, None, None]


def test_clean_gpus_and_other_gpus_processes_do_not_drain(gpu_node):
    for apps, gpus in (("", [0, 1]), ("4242, GPU-bbb\n", [0])):
        run = Run(apps)
        assert jobclean.epilog({"gpu_settle_s": 0}, ENV, gpus, lambda *a: [], run) == []
        assert not [c for c in run.calls if c[0] == "scontrol"]


def test_leftovers_wait_for_the_users_last_job_and_never_touch_system_accounts(monkeypatch):
    ended = []
    monkeypatch.setattr(jobclean, "leftovers", lambda uid, job: [123])
    monkeypatch.setattr(jobclean, "end_processes", lambda pids, **_: ended.extend(pids) or [])
    run = Run("")
    assert jobclean.epilog({"end_leftovers": True}, ENV, [], lambda *a: ["78"], run) == [] and ended == []
    said = jobclean.epilog({"end_leftovers": True}, ENV, [], lambda *a: None, run)
    assert said == ["squeue failed: the user's processes here are left alone"] and ended == []
    assert jobclean.epilog({"end_leftovers": True}, dict(ENV, SLURM_JOB_UID="0"), [], lambda *a: [], run) == []
    assert jobclean.epilog({"end_leftovers": False}, ENV, [], lambda *a: [], run) == [] and ended == []
    said = jobclean.epilog({"end_leftovers": True}, ENV, [], lambda *a: [], run)
    assert ended == [123] and said == ["ended 1 leftover process(es) of uid 2001 (SIGKILL: 0)"]


def test_the_stand_in_nvidia_smi_reports_the_emulated_compute_apps(tmp_path, capsys):
    """The virtual cluster's nvidia-smi answers the epilog's query from its JSON file, in nvidia-smi's csv."""
    smi = types.ModuleType("standin_smi")
    exec(resources.files("corral.virtual").joinpath("files/nvidia-smi").read_text(), smi.__dict__)
    gpus = [{"index": 0, "uuid": "GPU-aaa", "bus_id": "x", "name": "H100"},
            {"index": 1, "uuid": "GPU-bbb", "bus_id": "y", "name": "H100"}]
    smi.gpus = lambda: gpus
    smi.APPS = str(tmp_path / "apps.json")
    assert smi.main(["--query-compute-apps=pid,gpu_uuid", "--format=csv,noheader"]) == 0
    assert capsys.readouterr().out == ""  # no file: no process
    Path(smi.APPS).write_text(json.dumps([{"pid": 4242, "gpu_uuid": "GPU-bbb", "name": "python"},
                                          {"pid": 9, "gpu_uuid": "GPU-gone"}]))
    assert smi.main(["--query-compute-apps=pid,process_name,gpu_uuid,used_memory", "--format=csv,noheader"]) == 0
    out = capsys.readouterr().out
    assert out == "4242, python, GPU-bbb, 0 MiB\n"
    assert jobclean.parse_compute_apps(out.replace("python, ", "")) == [(4242, "GPU-bbb")]
    assert smi.main(["--query-compute-apps=nonsense", "--format=csv"]) == 2


def test_virtual_nodes_advance_namespace_ids_at_boot_before_slurmd(tmp_path):
    """virtual/nsid.py: the script and its enabled boot unit in a node's tree, ordered before slurmd."""
    import py_compile

    from corral.virtual import nsid
    nsid.install(tmp_path)
    nsid.install(tmp_path)  # again (a node prepared twice): the same
    script = tmp_path / nsid.SCRIPT
    assert script.stat().st_mode & 0o755 == 0o755
    py_compile.compile(str(script), cfile=str(tmp_path / "x.pyc"), doraise=True)
    assert "Before=sysinit.target slurmd.service" in (tmp_path / nsid.UNIT).read_text()
    assert (tmp_path / nsid.WANTS).readlink() == Path("/" + nsid.UNIT)
