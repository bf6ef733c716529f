"""Idle allocated GPUs and energy per job and per group (pure): sacct's jobs joined with Prometheus's
per-job figures (reports/prom_api.py) on the Slurm job id (JobIDRaw = dcgm-exporter's hpc_job).

Per job (one job id; the runs of a requeued job share it and its figures):
- GPU-hours: allocated GPUs x run time in the window (the same figure as the usage rows).
- mean utilisation: the mean of every DCGM_FI_DEV_GPU_UTIL sample of the job's GPUs, %.
- idle GPU-hours: its GPU-hours x the share of its sampled GPU time under 10 % (promql.py: idle steps
  / steps); a job too short for one step: all of them if its mean is under 10 %, else none.
- kWh: the increase of DCGM's energy counter on its GPUs / 3.6e9 (mJ); CO2: kWh x
  reports.co2_g_per_kwh (kg). A job's runs share its figures in proportion to their GPU-hours.
Per group (the rows of `--by`, split like the GPU-hours for gpu-type): the observed jobs' sums; the mean
weighted by GPU-hours; `unobserved_gpu_hours`: GPU-hours of jobs without a utilisation sample (their
energy still counts where DCGM has it). A figure no job of the row has is None.
"""

from __future__ import annotations

from dataclasses import dataclass

from corral.reports.prom_api import JobUse
from corral.reports.promql import IDLE_BELOW_PCT, MJ_PER_KWH
from corral.reports.sacct import Job
from corral.reports.usage import NONE, run_seconds

KEYS = ("mean_gpu_util_pct", "idle_gpu_hours", "energy_kwh", "co2_kg", "unobserved_gpu_hours")


def idle_share(use: JobUse) -> float | None:
    if use.steps:
        return min(1.0, (use.idle_steps or 0.0) / use.steps)
    mean = use.mean_util
    return None if mean is None else float(mean < IDLE_BELOW_PCT)


@dataclass(slots=True)
class Sums:
    gpu_h: float = 0.0          # observed jobs' GPU-hours (the mean's weights)
    util_h: float = 0.0         # mean x GPU-hours
    idle_h: float = 0.0
    kwh: float | None = None
    unobserved_h: float = 0.0

    def add(self, gpu_h: float, use: JobUse | None, share_of_job: float) -> None:
        """`share_of_job`: this part's share of the job's GPU-hours (a run, a GPU type): of its energy."""
        if use is not None and use.energy_mj is not None:
            self.kwh = (self.kwh or 0.0) + use.energy_mj / MJ_PER_KWH * share_of_job
        mean = use.mean_util if use else None
        if mean is None:
            self.unobserved_h += gpu_h
            return
        self.gpu_h += gpu_h
        self.util_h += mean * gpu_h
        self.idle_h += gpu_h * (idle_share(use) or 0.0)

    def row(self, co2_g_per_kwh: float | None) -> dict:
        seen = self.gpu_h > 0
        return {"mean_gpu_util_pct": round(self.util_h / self.gpu_h, 1) if seen else None,
                "idle_gpu_hours": round(self.idle_h, 3) if seen else None,
                "energy_kwh": None if self.kwh is None else round(self.kwh, 3),
                "co2_kg": None if self.kwh is None or co2_g_per_kwh is None else round(self.kwh * co2_g_per_kwh / 1000, 3),
                "unobserved_gpu_hours": round(self.unobserved_h, 3)}


def runs(jobs: list[Job], since: int, until: int, now: int) -> list[tuple[Job, float]]:
    """(job, GPU-hours in the window) of every run that held GPUs in it."""
    out = []
    for job in jobs:
        if job.gpus:
            secs = run_seconds(job, since, until, now)
            if secs > 0:
                out.append((job, sum(job.gpus.values()) * secs / 3600))
    return out


def by_group(jobs: list[Job], uses: dict[str, JobUse], by: str, since: int, until: int, now: int,
             co2_g_per_kwh: float | None) -> tuple[dict[str, dict], dict]:
    """(row key -> the GPU figures of the row, totals' figures)."""
    held = runs(jobs, since, until, now)
    per_id: dict[str, float] = {}
    for job, gpu_h in held:
        per_id[job.job_id] = per_id.get(job.job_id, 0.0) + gpu_h
    groups: dict[str, Sums] = {}
    total = Sums()
    for job, gpu_h in held:
        use = uses.get(job.job_id)
        share = gpu_h / per_id[job.job_id]
        total.add(gpu_h, use, share)
        if by == "gpu-type":
            count = sum(job.gpus.values())
            for t, n in job.gpus.items():
                groups.setdefault(t, Sums()).add(gpu_h * n / count, use, share * n / count)
        else:
            groups.setdefault(getattr(job, by) or NONE, Sums()).add(gpu_h, use, share)
    return {k: g.row(co2_g_per_kwh) for k, g in groups.items()}, total.row(co2_g_per_kwh)


def top_idle(jobs: list[Job], uses: dict[str, JobUse], since: int, until: int, now: int,
             co2_g_per_kwh: float | None, n: int) -> list[dict]:
    """The `n` observed jobs with the most idle GPU-hours (then the lowest mean), one entry per job id."""
    merged: dict[str, tuple[Job, float]] = {}
    for job, gpu_h in runs(jobs, since, until, now):
        if uses.get(job.job_id) is not None and uses[job.job_id].mean_util is not None:
            before = merged.get(job.job_id)
            merged[job.job_id] = (job, gpu_h + (before[1] if before else 0.0))
    out = []
    for job_id, (job, gpu_h) in merged.items():
        sums = Sums()
        sums.add(gpu_h, uses[job_id], 1.0)
        out.append({"job_id": job_id, "user": job.user, "account": job.account, "partition": job.partition,
                    "gpus": sum(job.gpus.values()), "gpu_hours": round(gpu_h, 3)}
                   | {k: v for k, v in sums.row(co2_g_per_kwh).items() if k != "unobserved_gpu_hours"})
    out.sort(key=lambda r: (-r["idle_gpu_hours"], r["mean_gpu_util_pct"], r["job_id"]))
    return out[:n]


def empty_row() -> dict:
    """The GPU figures of a row when the report has no GPU data at all."""
    return dict.fromkeys(KEYS)
