"""`corral report usage`'s figures (reports/usage.py): run time clipped to the window, nearest-rank
percentiles, GPU types, shares, cost; on the week of tests/fixtures/sacct/week.txt, worked by hand."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from corral.reports.sacct import Job, parse
from corral.reports.usage import aggregate, percentile, run_seconds

SACCT = Path(__file__).resolve().parent.parent / "fixtures" / "sacct"
H = 3600
SINCE = int(dt.datetime(2026, 3, 1, tzinfo=dt.timezone.utc).timestamp())
UNTIL = SINCE + 7 * 86400
PRICES = {"h100": 2.5, "a100": 1.5}


def job(start, end, elapsed=None, *, submit=None, state="COMPLETED", gpus=None, ncpus=8, account="a") -> Job:
    if elapsed is None:
        elapsed = (end - start) if start is not None and end is not None else 10**9
    return Job("1", "u", account, "gpu", "normal", state, start if submit is None else submit, start, end, elapsed,
               ncpus, {"h100": 1} if gpus is None else gpus)


def week(by: str, prices=PRICES):
    jobs, _ = parse((SACCT / "week.txt").read_text().splitlines())
    return aggregate(jobs, by, SINCE, UNTIL, UNTIL, prices)


@pytest.mark.parametrize("start, end, elapsed, expected", [
    (SINCE + H, SINCE + 3 * H, None, 2 * H),                  # inside
    (SINCE - 2 * H, SINCE + H, None, H),                      # started before the window: its part inside
    (UNTIL - H, UNTIL + 5 * H, None, H),                      # ended after it
    (SINCE - H, UNTIL + H, None, 7 * 86400),                  # across the whole window
    (SINCE - 3 * H, SINCE - H, None, 0),                      # before it
    (UNTIL, UNTIL + H, None, 0),                              # at its end: [since, until)
    (SINCE + H, SINCE + 5 * H, 3 * H, 3 * H),                 # suspended an hour: ElapsedRaw is less
    (None, None, 0, 0),                                       # never started
])
def test_run_time_is_clipped_to_the_window(start, end, elapsed, expected):
    assert run_seconds(job(start, end, elapsed), SINCE, UNTIL, UNTIL) == expected


def test_a_running_job_runs_until_now_or_the_windows_end():
    running = job(UNTIL - 5 * H, None)
    assert run_seconds(running, SINCE, UNTIL, now=UNTIL - 2 * H) == 3 * H
    assert run_seconds(running, SINCE, UNTIL, now=UNTIL + 9 * H) == 5 * H


@pytest.mark.parametrize("values, p50, p95", [
    ([], None, None), ([7], 7, 7), ([1, 2], 1, 2), ([5, 10, 30, 7200], 10, 7200),
    (list(range(1, 101)), 50, 95), (list(range(1, 21)), 10, 19),
])
def test_percentiles_are_nearest_rank(values, p50, p95):
    assert (percentile(values, 50), percentile(values, 95)) == (p50, p95)


def test_by_account_on_the_week():
    rows, totals = week("account")
    assert [r["key"] for r in rows] == ["physics", "vision", "(none)"]  # most GPU-hours first
    physics, vision, none = rows
    # 1004: 4 a100 x 4 h (00:00-04:00 of its 6 h); 1005: 8 h100 x 4 h (running, until the window's end);
    # 1008: a 1g.10gb MIG device x 0.5 h; 1010: 4 GPUs (2 a100, 2 h100) x 0.5 h; 1006: no GPU
    assert physics["gpu_hours"] == 50.5 and physics["gpu_hours_by_type"] == {"1g.10gb": 0.5, "a100": 17.0,
                                                                              "h100": 33.0}
    assert physics["cpu_hours"] == 32 * 4 + 64 * 4 + 4 * 1 + 2 * 0.5 + 8 * 0.5
    assert physics["jobs"] == 5 and physics["failed_share"] == 0.4 and physics["cancelled_share"] == 0.2
    # waits of the jobs that started in the window (1004 started before it): 7200, 10, 30, 5
    assert (physics["wait_p50_s"], physics["wait_p95_s"]) == (10, 7200)
    assert physics["cost"] == 17 * 1.5 + 33 * 2.5 and physics["unpriced_gpu_hours"] == 0.5
    # 1001: 2 x 2 h; 1002: 0.5 h; 1003 never started; 1007: two runs of 1 h (requeued)
    assert (vision["jobs"], vision["gpu_hours"], vision["cpu_hours"]) == (5, 6.5, 52.0)
    assert (vision["wait_p50_s"], vision["wait_p95_s"]) == (600, 3600)
    assert (vision["failed_share"], vision["cancelled_share"]) == (0.2, 0.2)
    # 1009: no account, untyped GPUs, 4 h with 1 h suspended
    assert none["gpu_hours_by_type"] == {"gpu": 6.0} and none["cost"] == 0 and none["unpriced_gpu_hours"] == 6.0
    assert totals["key"] == "TOTAL" and totals["jobs"] == 11 and totals["gpu_hours"] == 63.0
    assert totals["cpu_hours"] == 493.0 and totals["cost"] == 124.25
    assert (totals["failed_share"], totals["cancelled_share"]) == (round(4 / 11, 4), round(2 / 11, 4))


def test_by_gpu_type_splits_a_jobs_gpu_hours_and_totals_count_each_job_once():
    rows, totals = week("gpu-type")
    by = {r["key"]: r for r in rows}
    assert list(by) == ["h100", "a100", "gpu", "1g.10gb", "(none)"]
    assert by["h100"]["gpu_hours"] == 39.5 and by["a100"]["gpu_hours"] == 17.0
    # 1010 (2 a100 + 2 h100, 8 CPUs, 0.5 h) is a job in both rows, its 4 CPU-hours split 2 + 2
    assert by["a100"]["jobs"] == 2 and by["a100"]["cpu_hours"] == 32 * 4 + 2
    assert by["(none)"]["jobs"] == 2 and by["(none)"]["gpu_hours"] == 0.0 and by["(none)"]["cpu_hours"] == 4.0
    assert by["h100"]["cost"] == 39.5 * 2.5 and by["gpu"]["cost"] == 0
    assert totals["jobs"] == 11 and totals["gpu_hours"] == 63.0 and totals["cpu_hours"] == 493.0
    assert sum(r["jobs"] for r in rows) == 12


@pytest.mark.parametrize("by, keys", [("user", ["carol", "bob", "alice", "dave", "erin"]),
                                      ("partition", ["gpu", "mig", "cpu", "gpu,debug"]), ("qos", ["normal", "high"])])
def test_other_groupings(by, keys):
    rows, totals = week(by)
    assert [r["key"] for r in rows] == keys and totals["gpu_hours"] == 63.0


def test_without_prices_there_is_no_cost():
    rows, totals = week("account", prices={})
    assert totals["cost"] is None and all(r["cost"] is None for r in rows)
    assert totals["unpriced_gpu_hours"] == 63.0


def test_a_job_without_gpus_counts_in_jobs_and_cpu_hours_only():
    rows, totals = aggregate([job(SINCE, SINCE + H, gpus={}, ncpus=4)], "account", SINCE, UNTIL, UNTIL, PRICES)
    assert (totals["jobs"], totals["gpu_hours"], totals["cpu_hours"], totals["cost"]) == (1, 0.0, 4.0, 0.0)


def test_no_jobs_is_an_empty_report():
    rows, totals = aggregate([], "account", SINCE, UNTIL, UNTIL, PRICES)
    assert rows == [] and totals["jobs"] == 0 and totals["failed_share"] == 0.0 and totals["wait_p50_s"] is None
