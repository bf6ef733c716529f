"""slurmctld's restarts judged from its own log (node/ctld_log.py, node/ctld_restart.py).

The capture (tests/fixtures/slurmctld/crashes.log.gz) is the whole slurmctld.log of a virtual cluster's
controller (Slurm 22.05.8) over these experiments, in order:
- 16:19:25-27: alice submitted 300 jobs from login1, slurmctld was killed (-9) at 16:19:30: all recovered;
- 16:20:0x-16:20:42: six rounds of 50 held jobs submitted as root, slurmctld killed 0, 0.5, 1, 2, 3 and 5 s
  after the last sbatch returned; squeue after each restart missed 50, 49, 49, 49, 50 and 0 of them
  (counted by the script that ran the rounds, not by corral);
- 16:21:36: a clean `systemctl restart slurmctld`;
- 16:23-16:24: one-second jobs, slurmctld killed right after they completed: jobs 363 and 364 ended at
  16:23:51, were recovered as not done at 16:23:54 and ran again at 16:23:59; job 365 likewise at 16:24:12.
"""

from __future__ import annotations

import gzip
import json
import sys
import time
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src" / "corral" / "node"))
import ctld_log  # noqa: E402
import ctld_restart  # noqa: E402

LOG = (Path(__file__).resolve().parents[1] / "fixtures" / "slurmctld" / "crashes.log.gz")


def capture() -> list[str]:
    return gzip.decompress(LOG.read_bytes()).decode().splitlines()


def upto(lines: list[str], start: str) -> str:
    """The log as it was just before the first run started after `start` (that run's start line excluded)."""
    starts = [i for i, line in enumerate(lines) if "started on cluster" in line and line[1:24] > start]
    return "\n".join(lines[:starts[0]] if starts else lines)


@pytest.mark.parametrize("restart, lost", [("2026-12-05T16:20:03.095", 50), ("2026-12-05T16:20:09.091", 49),
                                            ("2026-12-05T16:20:15.588", 49), ("2026-12-05T16:20:23.364", 49),
                                            ("2026-12-05T16:20:32.591", 50), ("2026-12-05T16:20:42.859", 0)])
def test_held_jobs_acknowledged_and_not_recovered_are_named(restart, lost):
    lines = capture()
    r = ctld_log.last_restart(upto(lines, restart))
    assert (r.at, r.clean, len(r.lost), r.recovery_done) == (restart, False, lost, True)
    # each one named was acknowledged by sbatch in the run before, and is not in the new run's recovery
    text = "\n".join(lines)
    for job in r.lost:
        assert f"_slurm_rpc_submit_batch_job: JobId={job} " in text
    assert not set(r.lost) & {line.split("JobId=")[1].split()[0] for line in upto(lines, restart).splitlines()
                              if line[1:24] >= restart and "Recovered JobId=" in line}


def test_the_first_crash_lost_nothing_and_nothing_ran_twice():
    r = ctld_log.last_restart(upto(capture(), "2026-12-05T16:19:32.094"))
    assert (r.clean, r.lost, r.reran, r.recovered) == (False, [], [], 303)


def test_a_clean_restart_loses_nothing():
    r = ctld_log.last_restart(upto(capture(), "2026-12-05T16:21:36.830"))
    assert (r.at, r.clean, r.lost, r.reran) == ("2026-12-05T16:21:36.830", True, [], [])


def test_jobs_that_ended_after_the_last_save_and_ran_again_are_named():
    lines = capture()
    assert ctld_log.last_restart(upto(lines, "2026-12-05T16:23:54.084")).reran == ["363", "364"]
    assert ctld_log.last_restart(upto(lines, "2026-12-05T16:24:12.843")).reran == ["365"]
    # judged at the start, before they were started again: not (yet) named
    start = next(i for i, line in enumerate(lines) if line.startswith("[2026-12-05T16:23:54.084]"))
    assert ctld_log.last_restart("\n".join(lines[:start + 400])).reran == []


def L(ts: int, msg: str) -> str:
    return f"[2026-12-05T10:00:{ts:02d}.000] {msg}"


START = "slurmctld version 22.05.8 started on cluster c"


def test_an_id_handed_out_again_is_judged_by_its_new_job():
    text = "\n".join([L(0, START), L(1, "_slurm_rpc_kill_job: REQUEST_KILL_JOB JobId=7 uid 0"),
                      L(2, "_slurm_rpc_submit_batch_job: JobId=7 InitPrio=1 usec=3"), L(5, START),
                      L(6, "Recovered information about 0 jobs")])
    assert ctld_log.last_restart(text).lost == ["7"]


def test_a_finished_job_purged_before_the_save_is_not_lost():
    text = "\n".join([L(0, START), L(1, "_slurm_rpc_submit_batch_job: JobId=3 InitPrio=1 usec=3"),
                      L(2, "_job_complete: JobId=3 done"), L(3, START), L(4, "Recovered JobId=3 Assoc=2"),
                      L(5, START), L(6, "Recovered information about 0 jobs")])
    assert ctld_log.last_restart(text).lost == []


def test_interactive_allocations_count_and_odd_lines_are_counted_not_raised():
    text = "\n".join(["garbage", L(0, START), L(1, "sched: _slurm_rpc_allocate_resources JobId=9 NodeList=(null)"),
                      "more garbage", L(3, START.replace("on cluster c", "on cluster c(4711)"))])
    r = ctld_log.last_restart(text)
    assert (r.lost, r.not_understood, r.recovery_done) == (["9"], 2, False)
    assert ctld_log.last_restart("").to_json()["at"] is None


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=120))
def test_no_text_a_user_controls_makes_an_id_that_is_not_a_number(noise):
    """Job names, paths and such appear inside slurmctld's messages, never at their start: whatever they
    hold, every ID judged is a job number."""
    text = "\n".join([L(0, START), L(1, f"_slurm_rpc_submit_batch_job: JobId=5 InitPrio=1 {noise}"),
                      L(2, f"error: {noise} JobId=6 _slurm_rpc_submit_batch_job: JobId=7"), L(3, noise),
                      L(4, START)])
    r = ctld_log.last_restart(text)
    assert r.lost == ["5"] and all(j.isdigit() for j in r.lost + r.reran)


def test_the_state_keeps_the_last_unclean_restart_across_a_clean_one(tmp_path, monkeypatch):
    monkeypatch.setattr(ctld_restart, "nrestarts", lambda: 1)
    state, prom = tmp_path / "state.json", tmp_path / "prom" / "corral_slurmctld.prom"
    prom.parent.mkdir()
    lines = capture()
    log = tmp_path / "slurmctld.log"
    log.write_text(upto(lines, "2026-12-05T16:20:32.591"))
    first = ctld_restart.record(ctld_restart.judge(log, 0), state, prom)
    assert len(first["last_unclean"]["lost"]) == 50 and first["last"] == first["last_unclean"]
    log.write_text(upto(lines, "2026-12-05T16:21:36.830"))
    ctld_restart.record(ctld_restart.judge(log, 0), state, prom)
    kept = json.loads(state.read_text())
    assert kept["last"]["clean"] and kept["last_unclean"]["at"] == "2026-12-05T16:20:32.591"
    assert kept["last_unclean"]["lost"][0] == "307" and oct(state.stat().st_mode & 0o777) == "0o644"
    from prometheus_client.parser import text_string_to_metric_families
    samples = {s.name: s for f in text_string_to_metric_families(prom.read_text()) for s in f.samples}
    assert samples["corral_slurmctld_lost_jobs"].value == 50
    ids = samples["corral_slurmctld_lost_jobs"].labels["job_ids"]
    assert ids.startswith("307,308,") and ids.endswith(",...(+30)") and ids.count(",") == 20
    assert samples["corral_slurmctld_unclean_restart_timestamp_seconds"].value == round(
        ctld_restart.epoch("2026-12-05T16:20:32.591")) > 0


def test_without_a_textfile_directory_only_the_state_is_written(tmp_path, monkeypatch):
    monkeypatch.setattr(ctld_restart, "nrestarts", lambda: None)
    log = tmp_path / "slurmctld.log"
    log.write_text("")
    out = ctld_restart.record(ctld_restart.judge(log, 0), tmp_path / "s.json", tmp_path / "none" / "x.prom")
    assert out["last_unclean"] is None and not (tmp_path / "none").exists()
    assert "corral_slurmctld_unclean_restart_timestamp_seconds 0" in ctld_restart.metrics(None)


def judged(tmp_path, monkeypatch, restart: str) -> str:
    """What the judge prints on the controller for the capture cut at `restart` (as `--json` prints it)."""
    monkeypatch.setattr(ctld_restart, "nrestarts", lambda: 3)
    log = tmp_path / "slurmctld.log"
    log.write_text(upto(capture(), restart))
    return json.dumps(ctld_restart.record(ctld_restart.judge(log, 0), tmp_path / "s.json", tmp_path / "x.prom"))


def test_validate_and_health_name_the_lost_jobs_of_a_recent_unclean_restart(tmp_path, monkeypatch):
    import subprocess
    from corral.checks.ctld_restart import restart_check
    from corral.render.ctld_restart import JUDGE
    out = judged(tmp_path, monkeypatch, "2026-12-05T16:23:54.084")
    sent = []

    def run(node, command, *, timeout):
        sent.append((node, command, timeout))
        data = json.loads(out)
        data["last_unclean_age_s"] = 60
        return subprocess.CompletedProcess(command, 0, json.dumps(data), "")
    check = restart_check(run, "ctl")
    assert sent == [("ctl", JUDGE, 30)]
    assert check.status == "WARN" and "slurmctld on ctl started at 2026-12-05T16:23:54.084 after an unclean end" \
        in check.message
    assert "2 job(s) that had ended ran again: 363, 364" in check.message and "lost" not in check.message
    assert check.nodes == {"ctl": "unclean restart 2026-12-05T16:23:54.084: lost none; ran again 363,364"}


def test_many_lost_jobs_are_named_twenty_then_counted_and_old_ones_are_history(tmp_path, monkeypatch):
    from corral.checks.ctld_restart import RECENT_S, verdict
    data = json.loads(judged(tmp_path, monkeypatch, "2026-12-05T16:20:32.591"))
    data["last_unclean_age_s"] = 5
    check = verdict(data, "ctl")
    assert check.status == "WARN" and "50 acknowledged job(s) lost" in check.message
    assert "307, 308, " in check.message and "and 30 more" in check.message
    data["last_unclean_age_s"] = RECENT_S + 1
    assert verdict(data, "ctl").status == "OK"


def test_a_judge_that_does_not_answer_is_a_failure_naming_the_node():
    import subprocess
    from corral.checks.ctld_restart import restart_check
    from corral.errors import NodeError
    check = restart_check(lambda *a, **k: subprocess.CompletedProcess("", 2, "", "python3: can't open file"), "ctl")
    assert check.status == "FAIL" and "did not run on ctl (rc=2): python3: can't open file" in check.message

    def gone(*a, **k):
        raise NodeError("command timed out after 30 s", node="ctl", command="x")
    assert restart_check(gone, "ctl").status == "FAIL"


def test_the_first_start_is_recovered_at_once_and_the_start_is_never_held_up(tmp_path):
    """A first start logs that it has no state: judged at once (no wait). With --wait the judge returns at once
    to slurmctld's ExecStartPost and writes its verdict from the background."""
    import subprocess
    text = "\n".join([L(0, START), L(1, "No job state file (/var/lib/slurm/slurmctld/job_state.old) to recover")])
    assert ctld_log.last_restart(text).recovery_done
    log = tmp_path / "slurmctld.log"
    log.write_text(L(0, START) + "\n")   # never recovers: the background judge gives up after --wait
    prog = Path(ctld_restart.__file__)
    t0 = time.monotonic()
    subprocess.run([sys.executable, str(prog), "--log", str(log), "--state", str(tmp_path / "s.json"),
                    "--textfile", str(tmp_path / "x.prom"), "--wait", "3"], check=True, timeout=10)
    assert time.monotonic() - t0 < 2 and not (tmp_path / "s.json").exists()
    log.write_text(text + "\n")
    deadline = time.monotonic() + 10
    while not (tmp_path / "s.json").exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert json.loads((tmp_path / "s.json").read_text())["last"]["recovery_done"]
