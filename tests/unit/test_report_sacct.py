"""`corral report usage`'s sacct query and parser (reports/sacct.py) on sacct lines in the format sacct(1)
documents (tests/fixtures/sacct/README.md): the fields, typed GPUs, jobs that never started or still run,
`CANCELLED by UID`, and lines not understood set aside, never raised."""

from __future__ import annotations

import datetime as dt
import shlex
from pathlib import Path

import pytest

from corral.reports.sacct import FIELDS, STATES, UNTYPED, epoch, gpus_of, parse, sacct_command

SACCT = Path(__file__).resolve().parent.parent / "fixtures" / "sacct"
UTC = dt.timezone.utc


def week():
    return parse((SACCT / "week.txt").read_text().splitlines())


def at(text: str) -> int:
    return int(dt.datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp())


def test_the_one_query_asks_for_allocations_of_every_user_in_the_window_in_utc():
    command = sacct_command(dt.datetime(2026, 3, 1, tzinfo=UTC), dt.datetime(2026, 3, 8, 12, 30, tzinfo=UTC))
    assert command == ("TZ=UTC SLURM_TIME_FORMAT=standard sacct --allusers --allocations --duplicates --parsable2 "
                       "--noheader --starttime 2026-03-01T00:00:00 --endtime 2026-03-08T12:30:00 --state "
                       "RUNNING,COMPLETED,FAILED,TIMEOUT,NODE_FAIL,OUT_OF_MEMORY,CANCELLED,PREEMPTED,BOOT_FAIL,"
                       "DEADLINE --format JobIDRaw,User,Account,Partition,QOS,State,Submit,Start,End,ElapsedRaw,"
                       "AllocTRES,NCPUS")
    assert len(FIELDS) == 12 and "PENDING" not in STATES


def test_the_window_is_given_in_utc_whatever_the_timezone_of_the_times_passed():
    plus2 = dt.timezone(dt.timedelta(hours=2))
    command = sacct_command(dt.datetime(2026, 3, 1, 2, 0, tzinfo=plus2), dt.datetime(2026, 3, 2, tzinfo=UTC))
    words = shlex.split(command)
    assert words[words.index("--starttime") + 1] == "2026-03-01T00:00:00"


def test_every_line_of_the_capture_is_a_job_with_its_fields():
    jobs, bad = week()
    assert bad == [] and len(jobs) == 11
    first = jobs[0]
    assert (first.job_id, first.user, first.account, first.partition, first.qos, first.state) == (
        "1001", "alice", "vision", "gpu", "normal", "COMPLETED")
    assert (first.submit, first.start, first.end) == (at("2026-03-02T09:58:00"), at("2026-03-02T10:00:00"),
                                                      at("2026-03-02T12:00:00"))
    assert (first.elapsed, first.ncpus, first.gpus) == (7200, 16, {"h100": 2})


def test_a_job_cancelled_while_pending_never_started_though_sacct_prints_a_start():
    jobs, _ = week()
    cancelled = next(j for j in jobs if j.job_id == "1003")
    assert cancelled.state == "CANCELLED"  # of "CANCELLED by 1000"
    assert cancelled.start is None and cancelled.gpus == {} and cancelled.ncpus == 0
    assert cancelled.partition == "gpu,debug"  # pending in two partitions: sacct prints both


def test_a_running_job_has_no_end_and_a_requeued_job_is_one_record_per_run():
    jobs, _ = week()
    running = next(j for j in jobs if j.job_id == "1005")
    assert running.state == "RUNNING" and running.end is None and running.start == at("2026-03-07T20:00:00")
    assert [j.state for j in jobs if j.job_id == "1007"] == ["REQUEUED", "COMPLETED"]


@pytest.mark.parametrize("tres, gpus", [
    ("billing=16,cpu=16,gres/gpu=2,gres/gpu:h100=2,mem=64G,node=1", {"h100": 2}),
    ("billing=16,cpu=16,gres/gpu=2,mem=64G,node=1", {UNTYPED: 2}),                     # untyped only
    ("cpu=8,gres/gpu=4,gres/gpu:a100=2,gres/gpu:h100=2,mem=32G,node=2", {"a100": 2, "h100": 2}),
    ("cpu=8,gres/gpu=3,gres/gpu:h100=2,node=1", {"h100": 2, UNTYPED: 1}),             # a type not tracked
    ("cpu=2,gres/gpu=1,gres/gpu:1g.10gb=1,node=1", {"1g.10gb": 1}),                    # a MIG device
    ("cpu=2,gres/gpu:h100=2,node=1", {"h100": 2}),                                     # typed without a total
    ("cpu=4,gres/gpumem=81920M,gres/gpuutil=100,mem=8G,node=1", {}),                   # not GPUs
    ("cpu=8,gres/gpu=0,gres/gpu:h100=0,node=1", {}),                                   # no_consume: zero
    ("billing=4,cpu=4,mem=8G,node=1", {}),
    ("", {}),
])
def test_gpus_of_alloc_tres(tres, gpus):
    assert gpus_of(tres) == gpus


def test_times_are_utc_seconds_and_nothing_else_is_a_time():
    assert epoch("1970-01-02T00:00:01") == 86401
    for bad in ("2026-03-02 09:58:00", "Mon 12:34:56", "2026-03-02", "2026-03-02T09:58:00+02:00", "Unknown"):
        with pytest.raises(ValueError):
            epoch(bad)


def test_lines_not_understood_are_set_aside_never_raised():
    jobs, bad = parse((SACCT / "malformed.txt").read_text().splitlines())
    assert [j.job_id for j in jobs] == ["2001", "2007"]
    assert len(bad) == 6  # sacct's own error, a cut line, a relative time, "two" GPUs, Elapsed not raw, a 13th field
    assert bad[0].startswith("sacct: error:") and bad[-1].endswith("|8|extra")


def test_hostile_text_in_a_field_is_just_text():
    line = "7|$(id)|a;b|`x`|n|COMPLETED|2026-03-02T09:58:00|2026-03-02T10:00:00|2026-03-02T11:00:00|3600|cpu=1|1"
    jobs, bad = parse([line, "|" * 11, "\x00" * 40, "é" * 30])
    assert bad == ["|" * 11, "\x00" * 40, "é" * 30] and jobs[0].user == "$(id)" and jobs[0].account == "a;b"
