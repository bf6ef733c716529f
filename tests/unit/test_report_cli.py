"""`corral report usage` end to end without a cluster: its one seam (reports/report.py remote(): the
runner) answers with captured sacct output. Text, JSON (always printed, ok: false on a failure), CSV;
exit 1 when the controller or sacct fails, 2 for usage and spec errors."""

from __future__ import annotations

import csv
import datetime as dt
import io
import json
import shlex
import subprocess
from pathlib import Path

import pytest

import corral.reports.report as R
from corral.cli.main import main
from corral.errors import NodeError

SACCT = Path(__file__).resolve().parent.parent / "fixtures" / "sacct"
SPEC = """\
name: lab
nodes:
  - {names: ctl, addresses: [10.0.0.10], roles: [controller, accounting]}
  - {names: "gpu[01-02]", addresses: "10.0.0.[11-12]", roles: [compute], gpus: {model: h100, count: 8}}
  - {names: "gpu[03-04]", addresses: "10.0.0.[13-14]", roles: [compute], gpus: {model: a100, count: 4}}
reports: {gpu_hour_cost: {h100: 2.5, a100: 1.5}, currency: EUR}
"""
WEEK = ["--since", "2026-03-01", "--until", "2026-03-08T00:00"]


class Runner:
    """Answers every command with (rc, stdout, stderr), or raises; records (node, command, timeout)."""

    def __init__(self, rc: int = 0, out: str | None = None, err: str = "", raises: Exception | None = None):
        self.answer = (rc, (SACCT / "week.txt").read_text() if out is None else out, err)
        self.raises = raises
        self.calls: list[tuple[str, str, float]] = []

    def __call__(self, node: str, command: str, *, timeout: float = 120):
        self.calls.append((node, command, timeout))
        if self.raises:
            raise self.raises
        return subprocess.CompletedProcess(command, *self.answer)


@pytest.fixture
def spec(tmp_path):
    path = tmp_path / "cluster.yaml"
    path.write_text(SPEC)
    return path


@pytest.fixture
def runner(monkeypatch):
    def use(**kw) -> Runner:
        r = Runner(**kw)
        monkeypatch.setattr(R, "remote", lambda cluster: r)
        return r
    return use


def report(spec, capsys, *args) -> tuple[int, str, str]:
    rc = main(["report", "usage", "-f", str(spec), *args])
    got = capsys.readouterr()
    return rc, got.out, got.err


def test_the_json_object(spec, capsys, runner):
    run = runner()
    rc, out, _ = report(spec, capsys, *WEEK, "--json")
    data = json.loads(out)
    assert rc == 0 and data["ok"] is True and data["error"] is None
    assert list(data) == ["ok", "error", "window", "by", "currency", "controller", "rows", "totals", "skipped_lines",
                          "skipped_sample", "gpu_util", "idle_jobs"]
    assert data["window"] == {"since": "2026-03-01T00:00:00Z", "until": "2026-03-08T00:00:00Z"}
    assert (data["by"], data["currency"], data["controller"], data["skipped_lines"]) == ("account", "EUR", "ctl", 0)
    assert [r["key"] for r in data["rows"]] == ["physics", "vision", "(none)"]
    assert data["totals"]["gpu_hours"] == 63.0 and data["totals"]["cost"] == 124.25
    [(node, command, timeout)] = run.calls  # one query, on the controller, bounded
    assert node == "ctl" and timeout == 120
    words = shlex.split(command)
    assert words[words.index("--starttime") + 1] == "2026-03-01T00:00:00"
    assert words[words.index("--endtime") + 1] == "2026-03-08T00:00:00"


def test_the_text_table(spec, capsys, runner):
    runner()
    rc, out, _ = report(spec, capsys, *WEEK, "--by", "gpu-type")
    assert rc == 0
    assert "GPU usage by gpu-type, 2026-03-01T00:00:00Z .. 2026-03-08T00:00:00Z (sacct on ctl)" in out
    header = next(line for line in out.splitlines() if "jobs" in line).split()
    assert header == ["gpu-type", "jobs", "GPU-h", "CPU-h", "wait", "p50", "wait", "p95", "failed", "cancel", "EUR"]
    assert "1g.10gb " in out  # a key is never cut
    h100 = next(line for line in out.splitlines() if "h100" in line)
    assert "39.5" in h100 and "98.75" in h100
    total = next(line for line in out.splitlines() if "TOTAL" in line)
    assert "63.0" in total and "493.0" in total and "124.25" in total and "36.4%" in total
    assert "6.5 GPU-hours of types without a price in reports.gpu_hour_cost (1g.10gb, gpu) are not in the cost" in out


def test_csv_is_a_header_and_the_rows(spec, capsys, runner):
    runner()
    rc, out, _ = report(spec, capsys, *WEEK, "--by", "user", "--csv")
    rows = list(csv.reader(io.StringIO(out)))
    assert rc == 0 and rows[0] == ["user", "jobs", "gpu_hours", "cpu_hours", "wait_p50_s", "wait_p95_s",
                                   "failed_share", "cancelled_share", "cost", "unpriced_gpu_hours", "currency",
                                   # the GPU figures after currency (test_report_gpu.py); none here: no monitoring node
                                   "mean_gpu_util_pct", "idle_gpu_hours", "energy_kwh", "co2_kg", "unobserved_gpu_hours"]
    assert [r[0] for r in rows[1:]] == ["carol", "bob", "alice", "dave", "erin"]
    assert rows[1][:3] == ["carol", "2", "48.0"] and rows[1][10:] == ["EUR", "", "", "", "", ""]
    assert rows[4][:10] == ["dave", "2", "2.0", "8.0", "5", "10", "0.0", "0.5", "4.0", "0.0"]  # 1006 and 1010


def test_lines_not_understood_are_counted_and_said(spec, capsys, runner):
    runner(out=(SACCT / "malformed.txt").read_text())
    rc, out, _ = report(spec, capsys, *WEEK)
    assert rc == 0 and "6 lines not understood (not counted), e.g. 'sacct: error:" in out
    runner(out=(SACCT / "malformed.txt").read_text())
    rc, out, _ = report(spec, capsys, *WEEK, "--json")
    data = json.loads(out)
    assert data["skipped_lines"] == 6 and len(data["skipped_sample"]) == 3 and data["totals"]["jobs"] == 2


def test_sacct_failing_is_exit_1_naming_the_node_and_sacct_s_words(spec, capsys, runner):
    err = "sacct: error: slurm_persist_conn_open_without_init: failed to open persistent connection to host:ctl:6819\n" \
          "sacct: error: Problem talking to the database: Connection refused\n"
    runner(rc=1, out="", err=err)
    rc, out, errout = report(spec, capsys, *WEEK)
    assert rc == 1 and out == ""
    assert "error: ctl: sacct failed (rc=1):" in errout and "Problem talking to the database: Connection refused" in errout
    runner(rc=1, out="", err=err)
    rc, out, _ = report(spec, capsys, *WEEK, "--json")
    data = json.loads(out)
    assert rc == 1 and data["ok"] is False and "Connection refused" in data["error"] and data["rows"] == []
    assert data["totals"] is None and data["window"]["since"] == "2026-03-01T00:00:00Z"


def test_an_unreachable_controller_is_exit_1_with_the_json_object(spec, capsys, runner):
    runner(rc=255, out="", err="ssh: connect to host 10.0.0.10 port 22: No route to host\n")
    rc, out, _ = report(spec, capsys, *WEEK, "--json")
    data = json.loads(out)
    assert rc == 1 and data["error"] == "ctl: cannot reach it over SSH (corral doctor says why): ssh: connect to host 10.0.0.10 port 22: " \
                                        "No route to host"
    runner(raises=NodeError("command timed out after 120 s", node="ctl", command="sacct ..."))
    rc, out, errout = report(spec, capsys, *WEEK, "--csv")
    assert rc == 1 and out == "" and "cannot run sacct on ctl: command timed out after 120 s" in errout


@pytest.mark.parametrize("args", [["--since", "yesterday"], ["--since", "2026-03-01 10:00"], ["--until", "03/08/2026"],
                                  ["--since", "2026-02-30"], ["--since", "2026-03-01T25:00"]])
def test_a_date_in_another_format_is_a_usage_error_naming_the_format(spec, capsys, runner, args):
    run = runner()
    rc, out, err = report(spec, capsys, *args)
    assert rc == 2 and "not a date or time" in err and "YYYY-MM-DD or YYYY-MM-DDTHH:MM[:SS] (UTC)" in err
    rc, out, _ = report(spec, capsys, *args, "--json")
    data = json.loads(out)
    assert rc == 2 and data["ok"] is False and "YYYY-MM-DD" in data["error"] and run.calls == []
    assert list(data) == ["ok", "error", "window", "by", "currency", "controller", "rows", "totals", "skipped_lines",
                          "skipped_sample", "gpu_util", "idle_jobs"]


@pytest.mark.parametrize("args, words", [
    (["--since", "2026-03-08", "--until", "2026-03-01"], "--since must be before --until"),
    (["--by", "node"], "--by: not a grouping (got 'node'); fix: choose from: account, user, partition, gpu-type, qos"),
    (["--json", "--csv"], "--json and --csv are two outputs; choose one"),
])
def test_other_usage_errors_are_exit_2(spec, capsys, runner, args, words):
    run = runner()
    rc, _, err = report(spec, capsys, *args)
    assert rc == 2 and words in err and run.calls == []


def test_the_default_window_is_30_days_from_midnight_utc_until_now(spec, capsys, runner):
    run = runner(out="")
    before = dt.datetime.now(dt.timezone.utc)
    rc, out, _ = report(spec, capsys, "--json")
    data = json.loads(out)
    since = dt.datetime.fromisoformat(data["window"]["since"].replace("Z", "+00:00"))
    until = dt.datetime.fromisoformat(data["window"]["until"].replace("Z", "+00:00"))
    assert rc == 0 and since == dt.datetime.combine((before - dt.timedelta(days=30)).date(), dt.time(),
                                                    tzinfo=dt.timezone.utc)
    assert abs((until - before).total_seconds()) < 60 and data["rows"] == [] and data["totals"]["jobs"] == 0
    assert len(run.calls) == 1


def test_a_spec_error_prints_the_json_object_and_exits_2(tmp_path, capsys, runner):
    run = runner()
    bad = tmp_path / "cluster.yaml"
    bad.write_text(SPEC.replace("a100: 1.5", "h100s: 1.5"))
    rc, out, _ = report(bad, capsys, "--json")
    data = json.loads(out)
    assert rc == 2 and data["ok"] is False and run.calls == []
    assert "a GPU-hour price for a GPU type no node of the spec has (got 'h100s')" in data["error"]


def test_no_accounting_node_is_a_spec_level_error(tmp_path, capsys, runner):
    run = runner()
    spec = tmp_path / "cluster.yaml"
    spec.write_text(SPEC.replace("roles: [controller, accounting]", "roles: [controller]"))
    rc, _, err = report(spec, capsys, *WEEK)
    assert rc == 2 and "Slurm keeps no job accounting" in err and run.calls == []


def test_without_a_runner_the_query_goes_over_ssh_with_run_on(spec, monkeypatch):
    from corral.spec.loader import load
    seen = []

    def run_on(cluster, node, command, **kw):
        seen.append((cluster.name, node, command, kw))
        return subprocess.CompletedProcess(command, 0, "", "")

    monkeypatch.setattr(R, "run_on", run_on)
    since, until = dt.datetime(2026, 3, 1, tzinfo=dt.timezone.utc), dt.datetime(2026, 3, 8, tzinfo=dt.timezone.utc)
    result = R.usage(load(spec), since, until, "qos", now=until)
    assert result.ok and result.totals["jobs"] == 0
    [(name, node, command, kw)] = seen
    assert (name, node, kw) == ("lab", "ctl", {"timeout": 120}) and command.startswith("TZ=UTC ")
