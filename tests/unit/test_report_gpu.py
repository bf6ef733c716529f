"""`corral report usage`'s GPU figures: mean utilisation, idle GPU-hours, kWh, CO2 per group and per job
(reports/gpu_use.py), worked by hand on tests/fixtures/sacct/week.txt + tests/fixtures/prometheus/week.json;
and end to end through the CLI with the report's seam answering sacct and curl: the figures in the
table, JSON and CSV, and every way Prometheus can fail leaving the sacct figures standing.

week.json, per job (GPU-hours in the window from sacct; mean = util_sum / util_samples; idle share =
idle_steps / steps; kWh = energy_mj / 3.6e9):
  1001 vision  h100 x2   4.0 h  mean 80   idle 59/236 = 1/4 -> 1.0 h   2.0 kWh
  1002 vision  h100 x1   0.5 h  mean 4    idle 30/30        -> 0.5 h   0.05 kWh
  1004 physics a100 x4  16.0 h  mean 40   idle 472/944      -> 8.0 h   4.0 kWh
  1005 physics h100 x8  32.0 h  mean 95   never idle        -> 0       no energy series
  1007 vision  h100 x1   2.0 h  (two runs of 1 h) mean 2, idle 118/118 -> 2.0 h, 0.12 kWh (0.06 a run)
  1008 physics 1g.10gb   0.5 h  no series (unobserved)
  1009 (none)  gpu x2    6.0 h  mean 7.5  idle 354/472 = 3/4 -> 4.5 h  energy NaN: unknown
  1010 physics a100 x2 + h100 x2  2.0 h  mean 50  never idle   0.6 kWh
  987: not a job of the window (ignored)
"""

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
from corral.reports.gpu_use import by_group, top_idle
from corral.reports.prom_api import figures
from corral.reports.sacct import parse

FIX = Path(__file__).resolve().parent.parent / "fixtures"
SINCE = int(dt.datetime(2026, 3, 1, tzinfo=dt.timezone.utc).timestamp())
UNTIL = SINCE + 7 * 86400
SPEC = """\
name: lab
nodes:
  - {names: ctl, addresses: [10.0.0.10], roles: [controller, accounting]}
  - {names: mon, addresses: [10.0.0.9], roles: [monitoring]}
  - {names: "gpu[01-02]", addresses: "10.0.0.[11-12]", roles: [compute], gpus: {model: h100, count: 8}}
  - {names: "gpu[03-04]", addresses: "10.0.0.[13-14]", roles: [compute], gpus: {model: a100, count: 4}}
monitoring: {retention_days: 3650}
reports: {gpu_hour_cost: {h100: 2.5, a100: 1.5}, currency: EUR, co2_g_per_kwh: 400}
"""
WEEK = ["--since", "2026-03-01", "--until", "2026-03-08T00:00"]


def week():
    jobs, _ = parse((FIX / "sacct" / "week.txt").read_text().splitlines())
    return jobs, figures((FIX / "prometheus" / "week.json").read_text()).jobs


def test_per_account_the_observed_jobs_sums_and_the_mean_weighted_by_gpu_hours():
    jobs, uses = week()
    rows, totals = by_group(jobs, uses, "account", SINCE, UNTIL, UNTIL, 400)
    assert rows["vision"] == {"mean_gpu_util_pct": 50.2,      # (80x4 + 4x0.5 + 2x2) / 6.5
                              "idle_gpu_hours": 3.5, "energy_kwh": 2.17, "co2_kg": 0.868, "unobserved_gpu_hours": 0.0}
    assert rows["physics"] == {"mean_gpu_util_pct": 75.6,     # (40x16 + 95x32 + 50x2) / 50; 1008 unobserved
                               "idle_gpu_hours": 8.0, "energy_kwh": 4.6, "co2_kg": 1.84, "unobserved_gpu_hours": 0.5}
    assert rows["(none)"] == {"mean_gpu_util_pct": 7.5, "idle_gpu_hours": 4.5, "energy_kwh": None, "co2_kg": None,
                              "unobserved_gpu_hours": 0.0}
    assert totals == {"mean_gpu_util_pct": 66.4,               # 4151 / 62.5
                      "idle_gpu_hours": 16.0, "energy_kwh": 6.77, "co2_kg": 2.708, "unobserved_gpu_hours": 0.5}


def test_per_gpu_type_a_job_of_two_types_is_split_by_its_gpus():
    jobs, uses = week()
    rows, _ = by_group(jobs, uses, "gpu-type", SINCE, UNTIL, UNTIL, None)
    assert rows["h100"] == {"mean_gpu_util_pct": 86.5,         # (320 + 2 + 3040 + 4 + 50x1) / 39.5
                            "idle_gpu_hours": 3.5, "energy_kwh": 2.47, "co2_kg": None, "unobserved_gpu_hours": 0.0}
    assert rows["a100"]["mean_gpu_util_pct"] == 40.6 and rows["a100"]["energy_kwh"] == 4.3  # 1010's half: 0.3
    assert rows["1g.10gb"] == {"mean_gpu_util_pct": None, "idle_gpu_hours": None, "energy_kwh": None, "co2_kg": None,
                               "unobserved_gpu_hours": 0.5}
    assert "(none)" not in rows  # no GPU: no GPU figures


def test_the_top_idle_jobs_one_entry_per_job_id_runs_merged():
    jobs, uses = week()
    top = top_idle(jobs, uses, SINCE, UNTIL, UNTIL, 400, 10)
    assert [j["job_id"] for j in top] == ["1004", "1009", "1007", "1001", "1002", "1010", "1005"]
    assert top[2] == {"job_id": "1007", "user": "alice", "account": "vision", "partition": "gpu", "gpus": 1,
                      "gpu_hours": 2.0, "mean_gpu_util_pct": 2.0, "idle_gpu_hours": 2.0, "energy_kwh": 0.12,
                      "co2_kg": 0.048}
    assert [j["job_id"] for j in top_idle(jobs, uses, SINCE, UNTIL, UNTIL, 400, 2)] == ["1004", "1009"]


def test_a_partial_answer_counts_what_it_has():
    """partial.json: 1001 util only (never idle, no energy), 1004 energy only, 1002 util_sum NaN."""
    jobs, _ = week()
    uses = figures((FIX / "prometheus" / "partial.json").read_text()).jobs
    rows, totals = by_group(jobs, uses, "account", SINCE, UNTIL, UNTIL, None)
    assert rows["vision"] == {"mean_gpu_util_pct": 80.0, "idle_gpu_hours": 0.0, "energy_kwh": None, "co2_kg": None,
                              "unobserved_gpu_hours": 2.5}                   # 1002 and 1007 unobserved
    assert rows["physics"] == {"mean_gpu_util_pct": None, "idle_gpu_hours": None, "energy_kwh": 4.0,
                               "co2_kg": None, "unobserved_gpu_hours": 50.5}  # 1004's energy still counts
    assert totals["unobserved_gpu_hours"] == 59.0 and totals["energy_kwh"] == 4.0


def test_a_job_too_short_for_a_step_is_idle_by_its_mean():
    jobs, _ = week()
    uses = figures(json.dumps({"status": "success", "data": {"resultType": "vector", "result": [
        {"metric": {"figure": "util_sum", "hpc_job": "1002"}, "value": [1, "20"]},
        {"metric": {"figure": "util_samples", "hpc_job": "1002"}, "value": [1, "4"]}]}})).jobs
    rows, _ = by_group(jobs, uses, "user", SINCE, UNTIL, UNTIL, None)
    assert rows["bob"]["idle_gpu_hours"] == 0.5 and rows["bob"]["mean_gpu_util_pct"] == 5.0


class Seam:
    """The report's runner: sacct's week on the controller, the Prometheus client (`timeout 75 python3
    -c ...`) answered with (rc, stdout, stderr) or an exception; records (node, first word, timeout)."""

    def __init__(self, rc: int = 0, out: str | None = None, err: str = "", raises: Exception | None = None,
                 sacct: str | None = None):
        self.curl = (rc, (FIX / "prometheus" / "week.json").read_text() if out is None else out, err)
        self.sacct = (FIX / "sacct" / "week.txt").read_text() if sacct is None else sacct
        self.raises = raises
        self.calls: list[tuple[str, str, float]] = []
        self.commands: list[str] = []

    def __call__(self, node: str, command: str, *, timeout: float = 120):
        self.calls.append((node, command.split()[0], timeout))
        self.commands.append(command)
        if command.startswith("timeout "):
            if self.raises:
                raise self.raises
            return subprocess.CompletedProcess(command, *self.curl)
        return subprocess.CompletedProcess(command, 0, self.sacct, "")


@pytest.fixture
def seam(monkeypatch):
    def use(**kw) -> Seam:
        s = Seam(**kw)
        monkeypatch.setattr(R, "remote", lambda cluster: s)
        return s
    return use


def report(tmp_path, capsys, *args, spec: str = SPEC) -> tuple[int, str, str]:
    path = tmp_path / "cluster.yaml"
    path.write_text(spec)
    rc = main(["report", "usage", "-f", str(path), *WEEK, *args])
    got = capsys.readouterr()
    return rc, got.out, got.err


def test_json_adds_the_gpu_figures_and_keeps_every_key_it_had(tmp_path, capsys, seam):
    run = seam()
    rc, out, _ = report(tmp_path, capsys, "--json", "--jobs", "3")
    data = json.loads(out)
    assert rc == 0 and list(data) == ["ok", "error", "window", "by", "currency", "controller", "rows", "totals",
                                      "skipped_lines", "skipped_sample", "gpu_util", "idle_jobs"]
    assert list(data["rows"][0])[:12] == ["key", "jobs", "gpu_hours", "cpu_hours", "wait_p50_s", "wait_p95_s",
                                          "failed_share", "cancelled_share", "cost", "unpriced_gpu_hours",
                                          "gpu_hours_by_type", "mean_gpu_util_pct"]
    assert data["totals"]["gpu_hours"] == 63.0 and data["totals"]["idle_gpu_hours"] == 16.0
    assert data["totals"]["co2_kg"] == 2.708
    assert data["gpu_util"] == {"ok": True, "reason": None, "prometheus_on": "mon", "idle_below_pct": 10,
                                "step_s": 61, "co2_g_per_kwh": 400.0, "gpu_jobs": 8, "gpu_jobs_observed": 7,
                                "notes": []}
    assert [j["job_id"] for j in data["idle_jobs"]] == ["1004", "1009", "1007"]
    # sacct on the controller, then the client on the monitoring node against its own Prometheus, bounded
    assert run.calls == [("ctl", "TZ=UTC", 120), ("mon", "timeout", 90)]
    words = shlex.split(run.commands[1])
    assert words[:4] == ["timeout", "75", "python3", "-I"] and words[6] == "http://10.0.0.9:9090/api/v1/query"
    assert words[8:] == ["1772928000", "60"] and "[604800s:61s]" in words[7]


def test_the_table_has_the_gpu_columns_and_the_idle_jobs(tmp_path, capsys, seam, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    seam()
    rc, out, _ = report(tmp_path, capsys, "--jobs", "2")
    header = next(line for line in out.splitlines() if "wait p50" in line).split()
    assert rc == 0 and header[-8:] == ["EUR", "util", "%", "idle", "GPU-h", "kWh", "CO2", "kg"]
    total = next(line for line in out.splitlines() if "TOTAL" in line).split()
    assert total[-4:] == ["66.4", "16.0", "6.77", "2.71"]
    assert "GPU utilisation from Prometheus on mon: 7 of 8 GPU jobs observed; idle: samples under 10 % utilisation" in out
    assert "0.5 GPU-hours of jobs without utilisation data are not in util % and idle GPU-h" in out
    assert "2 jobs with the most idle GPU-hours" in out
    assert next(line for line in out.splitlines() if line.split()[:1] == ["1004"]).split() == [
        "1004", "carol", "physics", "4", "16.0", "40.0", "8.0", "4.00", "1.60"]


def test_csv_appends_the_gpu_columns_and_with_jobs_lists_the_jobs(tmp_path, capsys, seam):
    seam()
    rc, out, _ = report(tmp_path, capsys, "--by", "account", "--csv")
    rows = list(csv.reader(io.StringIO(out)))
    assert rc == 0 and rows[0][10:] == ["currency", "mean_gpu_util_pct", "idle_gpu_hours", "energy_kwh", "co2_kg",
                                        "unobserved_gpu_hours"]
    assert rows[1][0] == "physics" and rows[1][10:] == ["EUR", "75.6", "8.0", "4.6", "1.84", "0.5"]
    assert rows[3][0] == "(none)" and rows[3][11:] == ["7.5", "4.5", "", "", "0.0"]
    seam()
    rc, out, _ = report(tmp_path, capsys, "--csv", "--jobs", "2")
    assert rc == 0 and list(csv.reader(io.StringIO(out))) == [
        ["job_id", "user", "account", "partition", "gpus", "gpu_hours", "mean_gpu_util_pct", "idle_gpu_hours",
         "energy_kwh", "co2_kg"],
        ["1004", "carol", "physics", "gpu", "4", "16.0", "40.0", "8.0", "4.0", "1.6"],
        ["1009", "bob", "", "gpu", "2", "6.0", "7.5", "4.5", "", ""]]


@pytest.mark.parametrize("kw, words", [
    ({"rc": 7, "out": "", "err": "ConnectionRefusedError: [Errno 111] Connection refused\n"},
     "Prometheus on mon (10.0.0.9:9090) is not answering (is it running?): ConnectionRefusedError: [Errno 111] "
     "Connection refused"),
    ({"rc": 28, "out": "", "err": "TimeoutError: timed out\n"},
     "Prometheus on mon (10.0.0.9:9090) did not answer within 75 s"),
    ({"rc": 124, "out": "", "err": ""}, "Prometheus on mon (10.0.0.9:9090) did not answer within 75 s"),
    ({"rc": 127, "out": "", "err": "bash: line 1: python3: command not found\n"},
     "python3 or timeout is missing on mon: bash: line 1: python3: command not found"),
    ({"rc": 1, "out": "", "err": "Traceback (most recent call last):\n  ...\nMemoryError\n"},
     "the query on mon failed (rc=1):   ... / MemoryError"),
    ({"rc": 255, "out": "", "err": "ssh: connect to host 10.0.0.9 port 22: No route to host\n"},
     "cannot reach mon over SSH: ssh: connect to host 10.0.0.9 port 22: No route to host"),
    ({"raises": NodeError("command timed out after 90 s", node="mon", command="timeout 75 python3 ...")},
     "cannot query Prometheus on mon: mon: command timed out after 90 s"),
    ({"out": (FIX / "prometheus" / "too_many_samples.json").read_text()},
     "Prometheus on mon refused the query: execution: query processing would load too many samples into memory"),
    ({"out": (FIX / "prometheus" / "not_found.txt").read_text()},
     "Prometheus on mon (10.0.0.9:9090) gave an answer not understood: not JSON: '404 page not found'"),
    ({"out": (FIX / "prometheus" / "empty.json").read_text()},
     "Prometheus on mon has no DCGM_FI_DEV_GPU_UTIL sample with a job label (hpc_job) in the window"),
])
def test_prometheus_failing_is_a_line_and_the_sacct_figures_stand(tmp_path, capsys, seam, kw, words):
    seam(**kw)
    rc, out, err = report(tmp_path, capsys)
    assert rc == 0 and err == "" and f"no GPU utilisation data: {words}" in out
    assert "124.25" in next(line for line in out.splitlines() if "TOTAL" in line)  # the cost, from sacct
    assert "util %" not in out
    seam(**kw)
    rc, out, _ = report(tmp_path, capsys, "--json", "--jobs", "5")
    data = json.loads(out)
    assert rc == 0 and data["ok"] is True and data["totals"]["gpu_hours"] == 63.0
    assert data["gpu_util"]["ok"] is False and words in data["gpu_util"]["reason"] and data["idle_jobs"] == []
    assert all(r[k] is None for r in [*data["rows"], data["totals"]] for k in
               ("mean_gpu_util_pct", "idle_gpu_hours", "energy_kwh", "co2_kg", "unobserved_gpu_hours"))


@pytest.mark.parametrize("spec, words, asked", [
    (SPEC + "virtual: {subnet: 10.0.0.0/24}\n",
     "emulated GPUs (virtual cluster: DCGM cannot read them, dcgm-exporter is not deployed); Prometheus on mon "
     "has no DCGM_FI_DEV_GPU_UTIL sample", True),
    (SPEC.replace("monitoring: {retention_days: 3650}", "monitoring: {retention_days: 3650, dcgm_exporter: {enabled: false}}"),
     "dcgm-exporter is deployed on no node (monitoring.dcgm_exporter.enabled is false); Prometheus on mon", True),
    (SPEC.replace("monitoring: {", "monitoring: {enabled: false, "),
     "monitoring is off (monitoring.enabled: false): no Prometheus to ask", False),
    (SPEC.replace("  - {names: mon, addresses: [10.0.0.9], roles: [monitoring]}\n", ""),
     "the spec has no monitoring node: no Prometheus to ask", False),
])
def test_without_dcgm_data_the_report_says_why(tmp_path, capsys, seam, spec, words, asked):
    run = seam(out=(FIX / "prometheus" / "empty.json").read_text())
    rc, out, _ = report(tmp_path, capsys, spec=spec)
    assert rc == 0 and f"no GPU utilisation data: {words}" in out
    assert [node for node, _, _ in run.calls] == (["ctl", "mon"] if asked else ["ctl"])


def test_no_gpu_job_in_the_window_asks_nothing(tmp_path, capsys, seam):
    cpu_only = [line for line in (FIX / "sacct" / "week.txt").read_text().splitlines() if "gres/gpu" not in line]
    run = seam(sacct="\n".join(cpu_only) + "\n")
    rc, out, _ = report(tmp_path, capsys)
    assert rc == 0 and "no GPU utilisation data: no job held a GPU in the window" in out
    assert [node for node, _, _ in run.calls] == ["ctl"]


def test_a_window_older_than_prometheus_keeps_is_said(tmp_path, capsys, seam):
    seam()
    rc, out, _ = report(tmp_path, capsys, "--json", spec=SPEC.replace("retention_days: 3650", "retention_days: 15"))
    notes = json.loads(out)["gpu_util"]["notes"]
    assert rc == 0 and len(notes) == 1 and notes[0].startswith(
        "Prometheus keeps 15 days (monitoring.retention_days): no utilisation data before about ")


def test_prometheus_s_warnings_are_passed_on(tmp_path, capsys, seam):
    seam(out=(FIX / "prometheus" / "partial.json").read_text())
    rc, out, _ = report(tmp_path, capsys)
    assert rc == 0 and "Prometheus warns: remote_read: remote storage at http://10.0.0.50:9201/read is not " \
                       "responding" in out
    assert "GPU utilisation from Prometheus on mon: 1 of 8 GPU jobs observed" in out


@pytest.mark.parametrize("value", ["-1", "10001", "many"])
def test_jobs_takes_a_count(tmp_path, capsys, seam, value):
    run = seam()
    rc, _, err = report(tmp_path, capsys, "--jobs", value)
    assert rc == 2 and "--jobs" in err and run.calls == []
