"""The one PromQL query of `corral report usage`'s GPU part (pure): per Slurm job, over the window.

How a GPU sample names its job: corral's Slurm prolog writes the job id into a file per GPU index in
`monitoring.gpu_job_map_dir` and the epilog removes it (node/jobhooks.py); dcgm-exporter reads that
directory at every scrape (`--hpc-job-mapping-dir`, render/dcgm_exporter.py) and copies each GPU's
samples once per job using it, with the label `hpc_job="<SLURM_JOB_ID>"` (sacct's JobIDRaw). So a
series with `hpc_job` exists only while its job holds the GPU, and a range over the whole window sees
each job's own time only (clipped to the window, as the sacct figures are).

One instant query at `until`, its five figures told apart by the label `figure` (`or` of vectors with
different label sets keeps them all), summed per `hpc_job` over the job's GPU series:
- util_sum, util_samples: sum and count of the raw DCGM_FI_DEV_GPU_UTIL samples (%): the mean.
- idle_steps, steps: the same series sampled every `step` seconds (a subquery), the steps below
  IDLE_BELOW_PCT and all of them: the share of the job's GPU time that was idle. A subquery because a
  filter cannot reach inside a range; its step bounds the points Prometheus holds (at most MAX_STEPS
  per series, never finer than the scrape interval).
- energy_mj: increase() of DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION (mJ, a counter since the driver
  loaded; increase() handles its resets) over the job's series: the job's GPU energy.
"""

from __future__ import annotations

import math

IDLE_BELOW_PCT = 10          # a GPU sample under 10 % utilisation is idle
MAX_STEPS = 10_000           # subquery points per series at most
MJ_PER_KWH = 3.6e9           # 1 kWh = 3.6e6 J
UTIL, ENERGY = "DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"
FIGURES = ("util_sum", "util_samples", "idle_steps", "steps", "energy_mj")
LABEL = "figure"


def step_s(window_s: int, scrape_interval_s: int) -> int:
    """The subquery's step: the scrape interval, or coarser so that the window has MAX_STEPS at most."""
    return max(scrape_interval_s, math.ceil(window_s / MAX_STEPS))


def usage_query(window_s: int, step: int) -> str:
    """The query, evaluated at the window's end; `window_s` and `step` are whole seconds."""
    w, s = f"{int(window_s)}s", f"{int(step)}s"
    util = f'{UTIL}{{hpc_job!=""}}'
    parts = {
        "util_sum": f"sum by (hpc_job) (sum_over_time({util}[{w}]))",
        "util_samples": f"sum by (hpc_job) (count_over_time({util}[{w}]))",
        "idle_steps": f"sum by (hpc_job) (count_over_time(({util} < {IDLE_BELOW_PCT})[{w}:{s}]))",
        "steps": f"sum by (hpc_job) (count_over_time({util}[{w}:{s}]))",
        "energy_mj": f'sum by (hpc_job) (increase({ENERGY}{{hpc_job!=""}}[{w}]))',
    }
    return " or ".join(f'label_replace({expr}, "{LABEL}", "{name}", "", "")' for name, expr in parts.items())
