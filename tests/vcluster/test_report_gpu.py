"""`corral report usage`'s GPU part on a real virtual cluster: the query really goes over SSH to the
monitoring node (ctl) and its real Prometheus, whose answer is parsed. Emulated GPUs have no
dcgm-exporter, so the answer is an empty vector and the report says so; with Prometheus stopped it
says that instead; the sacct figures stand either way. Runs on the shared cluster between
test_monitoring and test_slurm (module order) and starts Prometheus again before it ends."""

from __future__ import annotations

import json
import time

import pytest

from corral.cli.main import main
from tests.vcluster.conftest import settled, ssh

pytestmark = pytest.mark.vcluster
READY = "python3 -c \"import urllib.request; urllib.request.urlopen('http://{addr}:9090/-/ready', timeout=2)\""


@pytest.fixture(scope="module")
def vc(shared_cluster):
    settled(shared_cluster, "test-report-gpu-apply")
    job = ssh(shared_cluster, "ctl", "sbatch --parsable --wait -A research --gres=gpu:1 -N1 --wrap 'sleep 2'").stdout.strip()
    for _ in range(40):  # slurmdbd records the job shortly after it ends
        if ssh(shared_cluster, "ctl", f"sacct -n -X -P -j {int(job)} -o State").stdout.startswith("COMPLETED"):
            break
        time.sleep(0.5)
    return shared_cluster


def usage_json(vc, capsys) -> tuple[int, dict]:
    rc = main(["report", "usage", "-f", str(vc.cluster.path), "--json", "--jobs", "3"])
    return rc, json.loads(capsys.readouterr().out)


def test_the_real_prometheus_is_asked_and_has_no_dcgm_sample_of_emulated_gpus(vc, capsys):
    rc, data = usage_json(vc, capsys)
    assert rc == 0 and data["ok"] and data["totals"]["gpu_hours"] > 0, data
    g = data["gpu_util"]
    # this reason only follows a successful answer of the real Prometheus, parsed: an empty vector
    assert g["ok"] is False and g["prometheus_on"] == "ctl" and g["reason"] == (
        "emulated GPUs (virtual cluster: DCGM cannot read them, dcgm-exporter is not deployed); Prometheus on "
        "ctl has no DCGM_FI_DEV_GPU_UTIL sample with a job label (hpc_job) in the window"), g
    assert data["idle_jobs"] == [] and data["totals"]["mean_gpu_util_pct"] is None


def test_prometheus_stopped_is_a_line_and_the_sacct_figures_stand(vc, capsys):
    addr = vc.cluster.node("ctl").address
    ssh(vc, "ctl", "systemctl stop prometheus")
    try:
        rc, data = usage_json(vc, capsys)
        assert rc == 0 and data["ok"] and data["totals"]["gpu_hours"] > 0, data
        reason = data["gpu_util"]["reason"]
        assert reason.startswith(f"Prometheus on ctl ({addr}:9090) is not answering (is it running?): ") and \
            "Connection refused" in reason, reason
    finally:
        ssh(vc, "ctl", "systemctl start prometheus")
        deadline = time.monotonic() + 60
        while ssh(vc, "ctl", READY.format(addr=addr), check=False).returncode != 0:
            assert time.monotonic() < deadline, "Prometheus not ready again within 60 s"
            time.sleep(1)
