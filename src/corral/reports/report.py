"""`corral report usage`: the window, the one sacct query on the controller, the report.

Every command goes through one seam, `run(node, command, *, timeout)` -> CompletedProcess (as
checks/validate.py): by default engine.remote.run_on over SSH; tests answer with captured sacct output.
Always a report: the controller unreachable or sacct failing is `error` (ok: false), never an exception.
The GPU utilisation and energy figures (prom_query.py: one Prometheus query on the monitoring node) are
added to the rows when Prometheus has them; when not, `gpu_util.reason` says why and the rest stands.
"""

from __future__ import annotations

import datetime as dt
import re
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field

from corral.engine.remote import run_on
from corral.errors import CorralError, UsageError
from corral.reports import gpu_use
from corral.reports.prom_query import GpuData, fetch
from corral.reports.promql import IDLE_BELOW_PCT
from corral.reports.sacct import parse, sacct_command
from corral.reports.usage import BY, aggregate
from corral.spec.cluster import Cluster

TIMEOUT_S = 120
DAYS = 30  # the default window: from 00:00 UTC 30 days ago until now
DATE_FORMAT = "YYYY-MM-DD or YYYY-MM-DDTHH:MM[:SS] (UTC)"
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}(T\d{2}:\d{2}(:\d{2})?)?")
Run = Callable[..., subprocess.CompletedProcess]  # run(node, command, *, timeout)
UTC = dt.timezone.utc


def remote(cluster: Cluster) -> Run:
    """The real runner: the command over SSH on the node (engine.remote.run_on)."""
    def run(node: str, command: str, **kw) -> subprocess.CompletedProcess:
        return run_on(cluster, node, command, **kw)
    return run


def parse_when(text: str, option: str) -> dt.datetime:
    """A date or time given on the command line, as UTC; a usage error naming the format otherwise."""
    if _DATE.fullmatch(text.strip()):
        try:
            return dt.datetime.fromisoformat(text.strip()).replace(tzinfo=UTC)
        except ValueError:
            pass
    raise UsageError(f"{option}: not a date or time", value=text, fix=f"give {DATE_FORMAT}, e.g. 2026-03-01")


def window(since: str | None, until: str | None, now: dt.datetime) -> tuple[dt.datetime, dt.datetime]:
    """[since, until): defaults 00:00 UTC DAYS days ago and now."""
    start = parse_when(since, "--since") if since else dt.datetime.combine(
        (now - dt.timedelta(days=DAYS)).date(), dt.time(), tzinfo=UTC)
    end = parse_when(until, "--until") if until else now
    if end <= start:
        raise UsageError("--since must be before --until", value=f"{start:%Y-%m-%dT%H:%M:%S} .. "
                                                                f"{end:%Y-%m-%dT%H:%M:%S}",
                         fix="give an earlier --since or a later --until")
    return start, end


def _iso(t: dt.datetime) -> str:
    return t.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class UsageReport:
    since: dt.datetime
    until: dt.datetime
    by: str
    currency: str
    controller: str | None = None
    rows: list[dict] = field(default_factory=list)
    totals: dict | None = None
    skipped: int = 0                  # sacct lines not understood
    skipped_sample: list[str] = field(default_factory=list)
    error: str | None = None
    gpu_util: dict | None = None      # where the GPU figures come from, or why there are none
    idle_jobs: list[dict] = field(default_factory=list)  # --jobs N: the jobs with the most idle GPU-hours

    @property
    def ok(self) -> bool:
        return self.error is None

    def to_json(self) -> dict:
        return {"ok": self.ok, "error": self.error, "window": {"since": _iso(self.since), "until": _iso(self.until)},
                "by": self.by, "currency": self.currency, "controller": self.controller, "rows": self.rows,
                "totals": self.totals, "skipped_lines": self.skipped, "skipped_sample": self.skipped_sample,
                "gpu_util": self.gpu_util, "idle_jobs": self.idle_jobs}


def failed(error: str, by: str) -> dict:
    """The JSON object of a report that could not start (a usage or spec error): the same keys."""
    return {"ok": False, "error": error, "window": None, "by": by, "currency": None, "controller": None,
            "rows": [], "totals": None, "skipped_lines": 0, "skipped_sample": [], "gpu_util": None, "idle_jobs": []}


def add_gpu(report: UsageReport, jobs: list, data: GpuData, secs: list[int], co2: float | None, top: int) -> None:
    """The GPU figures into each row and the totals (None when Prometheus has none), the top idle jobs."""
    ids = {job.job_id for job, _ in gpu_use.runs(jobs, *secs)}
    report.gpu_util = {"ok": data.ok, "reason": data.reason, "prometheus_on": data.node,
                       "idle_below_pct": IDLE_BELOW_PCT, "step_s": data.step_s, "co2_g_per_kwh": co2,
                       "gpu_jobs": len(ids), "gpu_jobs_observed": sum(1 for i in ids if i in data.uses
                                                                      and data.uses[i].mean_util is not None),
                       "notes": data.notes}
    if not data.ok:
        for row in [*report.rows, report.totals]:
            row.update(gpu_use.empty_row())
        return
    rows, totals = gpu_use.by_group(jobs, data.uses, report.by, *secs, co2)
    none = gpu_use.Sums().row(co2)
    for row in report.rows:
        row.update(rows.get(row["key"], none))
    report.totals.update(totals)
    report.idle_jobs = gpu_use.top_idle(jobs, data.uses, *secs, co2, top) if top else []


def _tail(text: str) -> str:
    lines = [line for line in (text or "").strip().splitlines() if line.strip()]
    return " / ".join(lines[-3:])[-400:] or "no output"


def usage(cluster: Cluster, since: dt.datetime, until: dt.datetime, by: str = "account", *,
          run: Run | None = None, now: dt.datetime | None = None, timeout: float = TIMEOUT_S,
          top: int = 0) -> UsageReport:
    """The report of [since, until) grouped `by`; `run`: how the commands reach the nodes; `top`: how
    many of the jobs with the most idle GPU-hours to list."""
    if by not in BY:
        raise UsageError("--by: not a grouping", value=by, fix=f"choose from: {', '.join(BY)}")
    report = UsageReport(since, until, by, cluster.spec.reports.currency)
    controllers = cluster.with_role("controller")
    if not controllers or not cluster.with_role("accounting"):
        raise UsageError("the spec has no controller and accounting node: Slurm keeps no job accounting to "
                         "report on", fix="give a node the accounting role (slurmdbd) and apply")
    ctl = report.controller = controllers[0].name
    run = run or remote(cluster)
    now = now or dt.datetime.now(UTC)
    try:
        proc = run(ctl, sacct_command(since, until), timeout=timeout)
    except (CorralError, OSError) as exc:  # a timeout (NodeError), no ssh on this host
        text = " ".join(str(exc).split())
        report.error = f"cannot run sacct on {ctl}: {text.removeprefix(f'{ctl}: ')}"
        return report
    if proc.returncode != 0:
        what = ("cannot reach it over SSH (corral doctor says why)" if proc.returncode == 255
                else f"sacct failed (rc={proc.returncode})")
        report.error = f"{ctl}: {what}: {_tail(proc.stderr or proc.stdout)}"
        return report
    jobs, bad = parse(proc.stdout.splitlines())
    report.skipped, report.skipped_sample = len(bad), [line[:200] for line in bad[:3]]
    secs = [int(t.timestamp()) for t in (since, until, now)]
    report.rows, report.totals = aggregate(jobs, by, *secs, dict(cluster.spec.reports.gpu_hour_cost))
    data = fetch(cluster, run, since, until, now, gpu_jobs=len(gpu_use.runs(jobs, *secs)))
    add_gpu(report, jobs, data, secs, cluster.spec.reports.co2_g_per_kwh, top)
    return report
