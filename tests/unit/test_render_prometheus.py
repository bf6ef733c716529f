"""prometheus.yml rendered from the spec: every node of every role scraped, with its labels."""

from __future__ import annotations

import os
from pathlib import Path

from ruamel.yaml import YAML

from corral.render.prometheus import listen_address, render_prometheus_yml
from corral.spec.loader import load_text

GOLDEN = Path(__file__).parent.parent / "golden" / "render" / "prometheus" / "prometheus.yml"
SPEC = """\
name: lab
nodes:
  - {names: ctl, addresses: [10.0.0.10], roles: [controller, accounting]}
  - {names: mon, addresses: [10.0.0.9], roles: [monitoring]}
  - {names: login1, addresses: [10.0.0.8], roles: [login]}
  - names: gpu[01-03]
    addresses: 10.0.0.[11-13]
    roles: [compute]
    gpus: {model: h100, count: 8}
monitoring: {scrape_interval_s: 30}
"""


def test_golden_scrape_config():
    text = render_prometheus_yml(load_text(SPEC, "cluster.yaml"))
    if os.environ.get("CORRAL_UPDATE_GOLDEN"):
        GOLDEN.parent.mkdir(parents=True, exist_ok=True)
        GOLDEN.write_text(text)
    assert text == GOLDEN.read_text()


def test_every_node_of_every_role_is_a_target():
    cluster = load_text(SPEC, "cluster.yaml")
    doc = YAML(typ="safe").load(render_prometheus_yml(cluster))
    jobs = {j["job_name"]: j for j in doc["scrape_configs"]}
    node_targets = [c["targets"][0] for c in jobs["node"]["static_configs"]]
    assert node_targets == [f"{n.address}:9100" for n in cluster.nodes]
    assert jobs["prometheus"]["static_configs"][0]["targets"] == ["10.0.0.9:9090"]
    assert doc["global"]["scrape_interval"] == "30s"


def test_listen_address_binds_the_node_unless_told_otherwise():
    cluster = load_text(SPEC, "cluster.yaml")
    assert listen_address(cluster, "10.0.0.9", 9090) == "10.0.0.9:9090"
    everywhere = load_text(SPEC.replace("scrape_interval_s: 30", "listen: all"), "cluster.yaml")
    assert listen_address(everywhere, "10.0.0.9", 9090) == ":9090"


def test_slurm_exporter_and_dcgm_jobs():
    doc = YAML(typ="safe").load(render_prometheus_yml(load_text(SPEC, "cluster.yaml")))
    jobs = {j["job_name"]: j for j in doc["scrape_configs"]}
    assert jobs["slurm"]["honor_labels"] is True  # the exporter's per-node `node` label wins
    assert jobs["slurm"]["static_configs"][0]["targets"] == ["10.0.0.10:9341"]
    assert [c["targets"][0] for c in jobs["dcgm"]["static_configs"]] == [f"10.0.0.1{i}:9400" for i in (1, 2, 3)]
    assert doc["alerting"]["alertmanagers"][0]["static_configs"][0]["targets"] == ["10.0.0.9:9093"]
    assert doc["rule_files"] == ["/etc/prometheus/rules/*.yml"]


def test_no_dcgm_job_where_it_is_not_deployed():
    off = load_text(SPEC.replace("monitoring: {scrape_interval_s: 30}", "monitoring: {dcgm_exporter: {enabled: false}}"),
                    "cluster.yaml")
    doc = YAML(typ="safe").load(render_prometheus_yml(off))
    assert "dcgm" not in {j["job_name"] for j in doc["scrape_configs"]}


def test_scrape_config_passes_promtool(tmp_path):
    from tests.unit.test_alert_rules import tool
    path = tmp_path / "prometheus.yml"
    path.write_text(render_prometheus_yml(load_text(SPEC, "cluster.yaml")))
    import subprocess
    out = subprocess.run([tool("promtool"), "check", "config", "--syntax-only", str(path)], capture_output=True,
                         text=True)
    assert out.returncode == 0, out.stdout + out.stderr
