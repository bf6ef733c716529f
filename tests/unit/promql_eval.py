"""PromQL evaluated by the real Prometheus engine without a server: `promtool test rules` with
`promql_expr_test` cases (input series in promtool's expanding notation, expected samples); promtool
fails a case whose answer differs (labels or value). Shared by the report's and the dashboards' tests."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from tests.unit.test_alert_rules import tool

Case = tuple[str, str, dict[str, float]]  # (expression, eval time, {labels text: value})

# dcgm-exporter's series of two Slurm jobs, scraped every minute (promtool's `stale`: the staleness marker
# Prometheus writes when the epilog removes the job from a GPU's file and the hpc_job series disappears)
DCGM_SERIES = [
    # job 42 on gpu01's GPUs 0 and 1 for an hour: GPU 0 idle 30 min then busy, GPU 1 at 5 % throughout
    ('DCGM_FI_DEV_GPU_UTIL{node="gpu01",gpu="0",hpc_job="42"}', "0x29 100x30 stale"),
    ('DCGM_FI_DEV_GPU_UTIL{node="gpu01",gpu="1",hpc_job="42"}', "5x59 stale"),
    ('DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{node="gpu01",gpu="0",hpc_job="42"}', "1000000000+24000000x59 stale"),
    ('DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{node="gpu01",gpu="1",hpc_job="42"}', "5000000+6000000x59 stale"),
    # job 43 on gpu02's GPU 0 from minute 60, busy, still running at 120
    ('DCGM_FI_DEV_GPU_UTIL{node="gpu02",gpu="0",hpc_job="43"}', "_x60 90x60"),
    # a GPU without a job: never counted
    ('DCGM_FI_DEV_GPU_UTIL{node="gpu02",gpu="1"}', "0x120"),
]


def promtool_test(tmp_path: Path, series: list[tuple[str, str]], cases: list[Case],
                  interval: str = "1m") -> subprocess.CompletedProcess:
    """Runs promtool on `series` (series text, values text) with one expression test per case."""
    test = {"rule_files": [], "evaluation_interval": interval, "tests": [{
        "interval": interval,
        "input_series": [{"series": s, "values": v} for s, v in series],
        "promql_expr_test": [{"expr": expr, "eval_time": at,
                              "exp_samples": [{"labels": labels, "value": value} for labels, value in samples.items()]}
                             for expr, at, samples in cases]}]}
    path = tmp_path / "promql_test.yml"
    path.write_text(json.dumps(test, indent=1))  # YAML reads JSON
    return subprocess.run([tool("promtool"), "test", "rules", path.name], cwd=tmp_path, capture_output=True,
                          text=True, timeout=60)
