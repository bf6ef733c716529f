"""GPU usage per group from sacct's jobs (pure): one pass over the jobs, percentiles by sorting per group.

The figures, per group (docs/components/reports.md shows how to check them by hand):
- run time in the window: the overlap of [Start, End] (End: `now` for a running job) with [since, until),
  at most ElapsedRaw (which leaves out suspended time). A job that ran across `since` or `until` counts
  only its part inside; a job that never started counts 0.
- GPU-hours: GPUs allocated (AllocTRES gres/gpu) x run time in the window / 3600; CPU-hours: NCPUS x the same.
- queue wait: Start - Submit of the jobs that started inside the window; p50 and p95 by the nearest-rank
  method (the smallest wait with at least p% of the waits at or below it); none without such a job.
- failed share: FAILED, NODE_FAIL, TIMEOUT, OUT_OF_MEMORY among the group's jobs; cancelled share:
  CANCELLED (any, "CANCELLED by UID" included).
- cost: each GPU type's GPU-hours x reports.gpu_hour_cost[type]; the GPU-hours of a type without a price
  are `unpriced_gpu_hours` (cost null when the spec sets no price at all).
- by gpu-type: a job's GPU-hours go to the row of each of its GPU types (untyped gres/gpu: "gpu"); its
  CPU-hours are split in proportion to its GPUs; it counts as a job (wait, state) in each of those rows.
  A job without GPUs is in the row "(none)". Totals count every job once.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from operator import attrgetter

from corral.reports.sacct import Job

BY = ("account", "user", "partition", "gpu-type", "qos")
FAILED = frozenset({"FAILED", "NODE_FAIL", "TIMEOUT", "OUT_OF_MEMORY"})
NONE = "(none)"


def percentile(ordered: list[int], p: float) -> int | None:
    """Nearest rank: the value at rank ceil(p/100 * n) of the sorted values (None for none)."""
    if not ordered:
        return None
    return ordered[max(1, math.ceil(p / 100 * len(ordered))) - 1]


def run_seconds(job: Job, since: int, until: int, now: int) -> int:
    """The job's run time inside [since, until), never more than its ElapsedRaw."""
    if job.start is None:
        return 0
    end = job.end if job.end is not None else now
    overlap = min(end, until) - max(job.start, since)
    return max(0, min(overlap, job.elapsed)) if overlap > 0 else 0


@dataclass(slots=True)
class Group:
    """The sums of one row."""

    jobs: int = 0
    gpu_s: dict[str, float] = field(default_factory=dict)  # GPU type -> GPU-seconds
    cpu_s: float = 0.0
    waits: list[int] = field(default_factory=list)
    failed: int = 0
    cancelled: int = 0

    def add(self, job: Job, gpu_s: dict[str, float], cpu_s: float, wait: int | None) -> None:
        self.jobs += 1
        for t, s in gpu_s.items():
            self.gpu_s[t] = self.gpu_s.get(t, 0.0) + s
        self.cpu_s += cpu_s
        if wait is not None:
            self.waits.append(wait)
        if job.state in FAILED:
            self.failed += 1
        elif job.state == "CANCELLED":
            self.cancelled += 1

    def merge(self, other: Group) -> None:
        self.jobs += other.jobs
        for t, s in other.gpu_s.items():
            self.gpu_s[t] = self.gpu_s.get(t, 0.0) + s
        self.cpu_s += other.cpu_s
        self.waits += other.waits
        self.failed += other.failed
        self.cancelled += other.cancelled

    def row(self, key: str, prices: dict[str, float]) -> dict:
        waits = sorted(self.waits)
        gpu_h = {t: s / 3600 for t, s in self.gpu_s.items()}
        priced = {t: h for t, h in gpu_h.items() if t in prices}
        cost = round(sum((h * prices[t] for t, h in priced.items()), 0.0), 2) if prices else None
        share = (lambda n: round(n / self.jobs, 4)) if self.jobs else (lambda n: 0.0)
        return {"key": key, "jobs": self.jobs, "gpu_hours": round(sum(gpu_h.values(), 0.0), 3),
                "cpu_hours": round(self.cpu_s / 3600, 3), "wait_p50_s": percentile(waits, 50),
                "wait_p95_s": percentile(waits, 95), "failed_share": share(self.failed),
                "cancelled_share": share(self.cancelled), "cost": cost,
                "unpriced_gpu_hours": round(sum((h for t, h in gpu_h.items() if t not in prices), 0.0), 3),
                "gpu_hours_by_type": {t: round(h, 3) for t, h in sorted(gpu_h.items())}}


def aggregate(jobs: list[Job], by: str, since: int, until: int, now: int,
              prices: dict[str, float]) -> tuple[list[dict], dict]:
    """(rows, totals): rows by GPU-hours, most first, then by key; totals over every job once."""
    groups: dict[str, Group] = {}
    split = by == "gpu-type"
    key_of = None if split else attrgetter(by)  # account, user, partition, qos: Job's attributes
    total = Group()
    for job in jobs:
        secs = run_seconds(job, since, until, now)
        gpu_s = {t: n * secs for t, n in job.gpus.items()}
        cpu_s = job.ncpus * secs
        wait = max(0, job.start - job.submit) if job.start is not None and since <= job.start < until else None
        if not split:
            key = key_of(job) or NONE
            group = groups.get(key)
            if group is None:
                group = groups[key] = Group()
            group.add(job, gpu_s, cpu_s, wait)
            continue
        total.add(job, gpu_s, cpu_s, wait)
        if not job.gpus:
            groups.setdefault(NONE, Group()).add(job, {}, cpu_s, wait)
        else:
            count = sum(job.gpus.values())
            for t, n in job.gpus.items():
                groups.setdefault(t, Group()).add(job, {t: gpu_s[t]}, cpu_s * n / count, wait)
    if not split:  # each job is in one row: the totals are the rows' sums
        for group in groups.values():
            total.merge(group)
    rows = [g.row(k, prices) for k, g in groups.items()]
    rows.sort(key=lambda r: (-r["gpu_hours"], r["key"]))
    return rows, total.row("TOTAL", prices)
