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
