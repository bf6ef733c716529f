"""Monitoring pieces rendered from the spec: Grafana files, dashboards, dcgm-exporter placement,
NVIDIA repository paths, spec checks of the monitoring section."""

from __future__ import annotations

import json

import pytest

from corral.render.dcgm_exporter import pin, unit
from corral.render.grafana import skip_reason
from corral.render.monitoring import node_exporter_args, spec_metrics
from corral.deploy.nvidia_repo import repo_path
from corral.errors import SpecError
from corral.render.grafana import dashboards, render_datasource, render_ini
from corral.render.prometheus import dcgm_skip_reason
from corral.spec.loader import load_text
from tests.unit.promql_eval import DCGM_SERIES, promtool_test

SPEC = """\
name: lab
nodes:
  - {names: ctl, addresses: [10.0.0.10], roles: [controller, accounting, monitoring]}
  - {names: "gpu[01-02]", addresses: "10.0.0.[11-12]", roles: [compute], gpus: {model: h100, count: 8}}
  - {names: cpu01, addresses: [10.0.0.20], roles: [compute]}
"""
VIRTUAL = SPEC + "virtual: {subnet: 10.0.0.0/24}\n"


def test_grafana_ini_binds_the_node_has_no_anonymous_access_and_the_given_password():
    ini = render_ini(load_text(SPEC, "cluster.yaml"), "10.0.0.10", "s3cret-XYZ")
    assert "http_addr = 10.0.0.10" in ini and "http_port = 3000" in ini
    assert "[auth.anonymous]\nenabled = false" in ini and "admin_password = s3cret-XYZ" in ini
    assert "allow_sign_up = false" in ini and "reporting_enabled = false" in ini


def test_grafana_datasource_points_at_prometheus():
    assert 'url: "http://10.0.0.10:9090"' in render_datasource(load_text(SPEC, "cluster.yaml"))


def test_grafana_is_skipped_on_the_virtual_cluster_with_a_reason():
    assert skip_reason(load_text(SPEC, "cluster.yaml")) is None
    assert "offline virtual nodes cannot reach" in skip_reason(load_text(VIRTUAL, "cluster.yaml"))


def test_dashboards_are_valid_and_use_the_provisioned_datasource():
    boards = dashboards()
    assert set(boards) == {"corral-cluster.json", "corral-gpu.json", "corral-accounting.json"}
    for name, text in boards.items():
        d = json.loads(text)
        assert d["uid"] == name[:-5] and d["panels"]
        ids = [p["id"] for p in d["panels"]]
        assert len(ids) == len(set(ids))
        for p in d["panels"]:
            assert p["datasource"]["uid"] == "corral-prometheus" and all(t["expr"] for t in p["targets"])
    gpu = json.loads(boards["corral-gpu.json"])
    exprs = " ".join(t["expr"] for p in gpu["panels"] for t in p["targets"])
    for metric in ("DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_POWER_USAGE",
                   "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "DCGM_FI_DEV_XID_ERRORS", "hpc_job", "GPU_I_ID",
                   "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"):
        assert metric in exprs
    for p in gpu["panels"]:  # the grid: no two panels overlap
        for o in gpu["panels"]:
            a, b = p["gridPos"], o["gridPos"]
            assert p is o or not (a["x"] < b["x"] + b["w"] and b["x"] < a["x"] + a["w"] and
                                  a["y"] < b["y"] + b["h"] and b["y"] < a["y"] + a["h"]), (p["title"], o["title"])


def _panel_exprs(title: str) -> list[str]:
    """A GPU dashboard panel's expressions, Grafana's variables as on a 2-hour range, every node and job."""
    panel = next(p for p in json.loads(dashboards()["corral-gpu.json"])["panels"] if p["title"] == title)
    subst = {"$__range": "7200s", "$job": ".*", "$node": ".*"}
    out = []
    for t in panel["targets"]:
        expr = t["expr"]
        for var, value in subst.items():
            expr = expr.replace(var, value)
        out.append(expr)
    return out


def test_the_idle_and_energy_panels_show_the_report_s_figures_from_the_same_series(tmp_path):
    """Evaluated by promtool on the series of test_report_prom.py: job 42 (two GPUs, an hour, 90 of 121
    GPU-minutes under 10 %, 1.785e9 mJ) and job 43 (one busy GPU, running)."""
    [idle_now, allocated_now] = _panel_exprs("Allocated GPUs idle (< 10 % utilisation)")
    [idle_h] = _panel_exprs("Idle allocated GPU-hours (time range)")
    [kwh] = _panel_exprs("GPU energy of jobs (time range)")
    util, job_idle, job_kwh = _panel_exprs("Jobs: mean GPU utilisation, idle GPU-hours, energy (time range)")
    energy_mj = 59 * 30e6 * 59.5 / 59  # as the report's query gives it (test_report_prom.py)
    out = promtool_test(tmp_path, DCGM_SERIES, [
        (idle_now, "20m", {"{}": 2}), (allocated_now, "20m", {"{}": 2}), (allocated_now, "120m", {"{}": 1}),
        (idle_h, "120m", {"{}": 90 / 60}),
        (kwh, "120m", {"{}": energy_mj / 3.6e9}),
        (util, "120m", {'{hpc_job="42"}': (31 * 100 + 60 * 5) / 121, '{hpc_job="43"}': 90}),  # the report's mean
        (job_idle, "120m", {'{hpc_job="42"}': 90 / 60}),      # idle GPU-minutes / 60; 43 never idle
        (job_kwh, "120m", {'{hpc_job="42"}': energy_mj / 3.6e9}),
    ])
    assert out.returncode == 0, out.stdout + out.stderr


def test_dcgm_exporter_only_on_real_gpu_compute_nodes():
    real, virtual = load_text(SPEC, "cluster.yaml"), load_text(VIRTUAL, "cluster.yaml")
    assert dcgm_skip_reason(real, real.node("gpu01")) is None
    assert dcgm_skip_reason(real, real.node("cpu01")) == "no GPUs on this node"
    assert "emulated" in dcgm_skip_reason(virtual, virtual.node("gpu01"))


def test_dcgm_exporter_unit_and_pin():
    u = unit("/usr/bin/dcgm-exporter", "10.0.0.11:9400", "/run/corral/gpu-jobs")
    assert ("ExecStart=/usr/bin/dcgm-exporter --address 10.0.0.11:9400 --collectors "
            "/etc/corral/dcgm-exporter/fields.csv --hpc-job-mapping-dir /run/corral/gpu-jobs") in u
    assert "Pin: version 1:4.5.2-1\nPin-Priority: 1001" in pin("datacenter-gpu-manager-exporter", "1:4.5.2-1")


@pytest.mark.parametrize("os_id,version,arch,want", [("debian", "12", "x86_64", "debian12/x86_64"),
                                                    ("debian", "13", "x86_64", "debian13/x86_64"),
                                                    ("ubuntu", "22.04", "x86_64", "ubuntu2204/x86_64"),
                                                    ("ubuntu", "24.04", "aarch64", "ubuntu2404/sbsa")])
def test_cuda_repository_paths(os_id, version, arch, want):
    assert repo_path(os_id, version, arch) == want


def test_debian_13_suite_is_pinned_to_its_own_key():
    from corral.render.nvidia import CUDA_KEY_FINGERPRINT, fingerprint_of
    cluster = load_text(SPEC, "cluster.yaml")
    assert fingerprint_of(cluster, "debian13") == "02182E60104FCDC26EAE1B8597A5D4CB8793F200"  # 8793F200
    assert fingerprint_of(cluster, "debian12") == fingerprint_of(cluster, "ubuntu2404") == CUDA_KEY_FINGERPRINT


def test_cuda_repository_refuses_an_unsupported_os_clearly():
    with pytest.raises(ValueError, match="debian 11 on x86_64"):
        repo_path("debian", "11", "x86_64")


def test_node_exporter_flags_and_spec_metrics():
    cluster = load_text(SPEC, "cluster.yaml")
    args = node_exporter_args(cluster, cluster.node("gpu01"))
    assert "--web.listen-address=10.0.0.11:9100" in args and "--collector.systemd " in args
    assert "\\" not in args  # /etc/default files are shell: no backslashes to escape
    assert "corral_node_gpus_expected 8" in spec_metrics(cluster.node("gpu01"))
    assert "corral_node_gpus_expected 0" in spec_metrics(cluster.node("ctl"))


def test_two_monitoring_services_on_one_port_is_a_located_error():
    with pytest.raises(SpecError) as e:
        load_text(SPEC + "monitoring: {alertmanager_port: 9090}\n", "cluster.yaml")
    assert "cluster.yaml:6" in str(e.value) and "port 9090 is also monitoring.prometheus_port" in str(e.value)


def test_dcgm_on_real_gpu_compute_nodes_only():
    from corral.render.dcgm import pin as dcgm_pin
    from corral.render.dcgm import skip_reason as dcgm_skip
    real, virtual = load_text(SPEC, "cluster.yaml"), load_text(VIRTUAL, "cluster.yaml")
    assert dcgm_skip(real, real.node("gpu01")) is None
    assert dcgm_skip(real, real.node("cpu01")) == "no GPUs on this node"
    assert "emulated" in dcgm_skip(virtual, virtual.node("gpu01"))
    off = load_text(SPEC + "nvidia: {dcgm: {enabled: false}}\n", "cluster.yaml")
    assert dcgm_skip(off, off.node("gpu01")) == "nvidia.dcgm.enabled is false"
    assert "Pin: version 1:4.2.3-1\nPin-Priority: 1001" in dcgm_pin("datacenter-gpu-manager-4-cuda12", "1:4.2.3-1")
    assert "not pinned" in dcgm_pin("datacenter-gpu-manager-4-cuda12", None)
