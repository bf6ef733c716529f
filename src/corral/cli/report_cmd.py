"""`corral report usage`: GPU usage and chargeback from Slurm accounting (the work is in corral/reports/).
A table, one JSON object (always, ok: false and the error on a failure) or CSV; exit 1 when the
controller cannot be reached or sacct fails, 2 on a usage or spec error."""

from __future__ import annotations

import csv
import datetime as dt
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Optional

import typer

from corral.cli.common import JsonOpt, SpecOpt, err, load_cluster, out, print_json
from corral.errors import CorralError, UsageError

if TYPE_CHECKING:
    from rich.table import Table

report_app = typer.Typer(no_args_is_help=True, help="Reports from the cluster's records (read-only).")
CSV_FIELDS = ("jobs", "gpu_hours", "cpu_hours", "wait_p50_s", "wait_p95_s", "failed_share", "cancelled_share",
              "cost", "unpriced_gpu_hours")
GPU_FIELDS = ("mean_gpu_util_pct", "idle_gpu_hours", "energy_kwh", "co2_kg", "unobserved_gpu_hours")  # after currency
JOB_FIELDS = ("job_id", "user", "account", "partition", "gpus", "gpu_hours", "mean_gpu_util_pct", "idle_gpu_hours",
              "energy_kwh", "co2_kg")


def duration(seconds: int | None) -> str:
    if seconds is None:
        return "-"
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    if seconds < 86400:
        return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
    return f"{seconds // 86400}d{seconds % 86400 // 3600:02d}h"


def _num(value: float | None, fmt: str = ",.1f") -> str:
    return "-" if value is None else format(value, fmt)


def _gpu_columns(data: dict) -> list[tuple[str, str, str]]:
    """(header, row key, format) of the GPU figures the table shows: none without Prometheus data."""
    g = data["gpu_util"]
    if not g or not g["ok"]:
        return []
    cols = [("util %", "mean_gpu_util_pct", ".1f"), ("idle GPU-h", "idle_gpu_hours", ",.1f"),
            ("kWh", "energy_kwh", ",.2f")]
    return cols + ([("CO2 kg", "co2_kg", ",.2f")] if g["co2_g_per_kwh"] is not None else [])


def _table(data: dict, priced: bool) -> Table:
    from rich import box
    from rich.table import Table
    w = data["window"]
    table = Table(title=f"GPU usage by {data['by']}, {w['since']} .. {w['until']} (sacct on {data['controller']})",
                  box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True)
    width = max(len(r["key"]) for r in [*data["rows"], data["totals"], {"key": data["by"]}])
    table.add_column(data["by"], overflow="fold", min_width=min(width, 24))
    gpu = _gpu_columns(data)
    for col in ("jobs", "GPU-h", "CPU-h", "wait p50", "wait p95", "failed", "cancel", *(
            [data["currency"]] if priced else []), *(h for h, _, _ in gpu)):
        table.add_column(col, justify="right", no_wrap=True)
    for i, r in enumerate([*data["rows"], data["totals"]]):
        cells = [r["key"], str(r["jobs"]), f"{r['gpu_hours']:,.1f}", f"{r['cpu_hours']:,.1f}",
                 duration(r["wait_p50_s"]), duration(r["wait_p95_s"]), f"{r['failed_share']:.1%}",
                 f"{r['cancelled_share']:.1%}"]
        if priced:
            cells.append(f"{r['cost']:,.2f}")
        cells += [_num(r[key], fmt) for _, key, fmt in gpu]
        table.add_row(*cells, end_section=i == len(data["rows"]) - 1)
    return table


def _text(data: dict, prices: dict[str, float]) -> None:
    out.print(_table(data, bool(prices)))
    totals = data["totals"]
    if prices and totals["unpriced_gpu_hours"]:
        types = sorted(t for t in totals["gpu_hours_by_type"] if t not in prices)
        out.print(f"{totals['unpriced_gpu_hours']:,.1f} GPU-hours of types without a price in reports.gpu_hour_cost "
                  f"({', '.join(types)}) are not in the cost", markup=False)
    if data["skipped_lines"]:
        out.print(f"{data['skipped_lines']} lines not understood (not counted), e.g. {data['skipped_sample'][0]!r}",
                  markup=False)
    for line in _gpu_lines(data):
        out.print(line, markup=False)
    if data["idle_jobs"]:
        out.print(_jobs_table(data))


def _gpu_lines(data: dict) -> list[str]:
    g, totals = data["gpu_util"], data["totals"]
    if not g["ok"]:
        return [f"no GPU utilisation data: {g['reason']}", *g["notes"]]
    lines = [f"GPU utilisation from Prometheus on {g['prometheus_on']}: {g['gpu_jobs_observed']} of {g['gpu_jobs']} "
             f"GPU jobs observed; idle: samples under {g['idle_below_pct']} % utilisation"]
    if totals["unobserved_gpu_hours"]:
        lines.append(f"{totals['unobserved_gpu_hours']:,.1f} GPU-hours of jobs without utilisation data are not in "
                     "util % and idle GPU-h")
    if totals["energy_kwh"] is None:
        lines.append("no GPU energy data (DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION): kWh unknown")
    elif g["co2_g_per_kwh"] is None:
        lines.append("no CO2 figure: reports.co2_g_per_kwh is not set")
    return lines + g["notes"]


def _jobs_table(data: dict) -> Table:
    from rich import box
    from rich.table import Table
    co2 = data["gpu_util"]["co2_g_per_kwh"] is not None
    table = Table(title=f"{len(data['idle_jobs'])} jobs with the most idle GPU-hours", box=box.SIMPLE_HEAD,
                  pad_edge=False, collapse_padding=True)
    for col in ("job", "user", "account"):
        table.add_column(col, overflow="fold")
    for col in ("GPUs", "GPU-h", "util %", "idle GPU-h", "kWh", *(["CO2 kg"] if co2 else [])):
        table.add_column(col, justify="right", no_wrap=True)
    for j in data["idle_jobs"]:
        table.add_row(j["job_id"], j["user"], j["account"] or "-", str(j["gpus"]), f"{j['gpu_hours']:,.1f}",
                      _num(j["mean_gpu_util_pct"]), _num(j["idle_gpu_hours"]), _num(j["energy_kwh"], ",.2f"),
                      *([_num(j["co2_kg"], ",.2f")] if co2 else []))
    return table


FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def cell(value) -> object:
    """A CSV cell a spreadsheet shows as text: a string starting like a formula (OWASP's CSV injection
    list: = + - @ tab CR) gets a leading apostrophe; names come from users (accounts, partitions, job
    fields Slurm reports). Numbers stay numbers; None is empty."""
    if value is None:
        return ""
    if isinstance(value, str) and value.startswith(FORMULA_START):
        return "'" + value
    return value


def _csv(data: dict, jobs: bool) -> None:
    """The rows (the GPU figures after `currency`, empty without data), or with --jobs the jobs."""
    writer = csv.writer(sys.stdout, lineterminator="\n")
    if jobs:
        writer.writerow(JOB_FIELDS)
        for j in data["idle_jobs"]:
            writer.writerow([cell(j[k]) for k in JOB_FIELDS])
        return
    writer.writerow([cell(data["by"]), *CSV_FIELDS, "currency", *GPU_FIELDS])
    for r in data["rows"]:
        writer.writerow([cell(r["key"]), *(cell(r[k]) for k in CSV_FIELDS), cell(data["currency"]),
                         *(cell(r[k]) for k in GPU_FIELDS)])


@report_app.command("usage")
def usage(spec: Optional[Path] = SpecOpt,
          since: Optional[str] = typer.Option(None, "--since", help="start of the window, UTC: YYYY-MM-DD or "
                                              "YYYY-MM-DDTHH:MM[:SS] (default: 00:00 UTC 30 days ago)"),
          until: Optional[str] = typer.Option(None, "--until", help="end of the window (excluded), UTC, same "
                                              "formats (default: now)"),
          by: str = typer.Option("account", "--by", help="one row per: account, user, partition, gpu-type, qos"),
          as_json: bool = JsonOpt,
          as_csv: bool = typer.Option(False, "--csv", help="print CSV: a header and one line per row (no totals); "
                                      "with --jobs, one line per job instead"),
          jobs: int = typer.Option(0, "--jobs", min=0, max=10_000, metavar="N",
                                   help="also list the N jobs with the most idle GPU-hours (Prometheus)"),
          ) -> None:
    """GPU usage and chargeback from Slurm accounting: one sacct query on the controller; per group jobs,
    GPU-hours and CPU-hours inside the window, queue wait p50/p95, failed and cancelled shares, cost; from
    Prometheus (dcgm-exporter, on the monitoring node) mean GPU utilisation, idle GPU-hours, kWh, CO2."""
    from corral.reports.report import failed, usage as run_usage, window
    now = dt.datetime.now(dt.timezone.utc)
    try:
        if as_json and as_csv:
            raise UsageError("--json and --csv are two outputs; choose one")
        start, end = window(since, until, now)
        cluster = load_cluster(spec)
        report = run_usage(cluster, start, end, by, now=now, top=jobs)
    except CorralError as exc:  # usage or spec: exit 2, but --json still gets its object
        if as_json:
            print_json(failed(str(exc), by))
        raise
    data = report.to_json()
    if as_json:
        print_json(data)
    elif not report.ok:
        err.print(f"error: {report.error}", markup=False)
    elif as_csv:
        _csv(data, bool(jobs))
    else:
        _text(data, dict(cluster.spec.reports.gpu_hour_cost))
    if not report.ok:
        raise typer.Exit(1)
