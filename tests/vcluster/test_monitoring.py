"""Monitoring end to end on a real virtual cluster: Prometheus, Alertmanager, node-exporter and
corral's Slurm exporter deployed by `apply`; every target up, exporter counts equal sinfo's, every
shipped PromQL expression evaluates, a stopped slurmd raises an alert in Alertmanager, and the
real prolog/epilog keep dcgm-exporter's GPU job-mapping files."""

from __future__ import annotations

import json
import re
import time
import urllib.parse
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families
from ruamel.yaml import YAML

from corral.cli.main import main
from corral.workflows.converge import converge
from corral.render.alerts import render_rules
from corral.render.grafana import dashboards
from tests.vcluster.conftest import settled, ssh

pytestmark = pytest.mark.vcluster
GRAFANA_VARS = {"$__range_s": "3600", "$__range": "1h", "$__rate_interval": "1m", "$__interval": "15s",
                "$node": ".*", "$job": ".*", "$partition": ".*"}


@pytest.fixture(scope="module")
def mon(shared_cluster):
    settled(shared_cluster, "test-monitoring-apply")
    return shared_cluster


def get(vc, port: int, path: str):
    with urllib.request.urlopen(f"http://{vc.cluster.node('ctl').address}:{port}{path}", timeout=10) as r:
        body = r.read().decode()
    return json.loads(body) if path.startswith("/api") else body


def query(vc, expr: str) -> dict:
    return get(vc, 9090, "/api/v1/query?" + urllib.parse.urlencode({"query": expr}))


def wait_for(what: str, probe, timeout: float = 90, every: float = 1):
    deadline, last = time.monotonic() + timeout, None
    while time.monotonic() < deadline:
        last = probe()
        if last:
            return last
        time.sleep(every)
    raise AssertionError(f"timed out waiting for {what}; last: {last!r}")


def test_every_target_is_up_and_services_bind_the_cluster_address(mon):
    def all_up():
        targets = get(mon, 9090, "/api/v1/targets")["data"]["activeTargets"]
        return targets if targets and all(t["health"] == "up" for t in targets) else None
    targets = wait_for("all scrape targets up", all_up)
    assert sorted((t["labels"]["job"], t["labels"]["node"]) for t in targets) == [
        ("alertmanager", "ctl"), ("node", "ctl"), ("node", "gpu01"), ("node", "gpu02"), ("prometheus", "ctl"),
        ("slurm", "ctl")]
    ctl = mon.cluster.node("ctl").address
    listening = ssh(mon, "ctl", "ss -Hltn").stdout
    for port in (9090, 9093, 9100, 9341):
        assert f"{ctl}:{port}" in listening
        assert f"0.0.0.0:{port}" not in listening and f"*:{port}" not in listening
    assert ":9094" not in listening  # Alertmanager's gossip port is off
    # bound to that address, each starts at boot only once the network is configured (render/restart.py)
    for unit in ("prometheus", "prometheus-alertmanager", "prometheus-node-exporter", "corral-slurm-exporter"):
        show = ssh(mon, "ctl", f"systemctl show -p After -p Wants {unit}").stdout
        assert show.count("network-online.target") == 2, (unit, show)
    assert ssh(mon, "ctl", "systemctl is-active systemd-networkd-wait-online").stdout.strip() == "active"


def exporter_metrics(vc) -> dict[str, list]:
    text = get(vc, 9341, "/metrics")
    return {f.name: f.samples for f in text_string_to_metric_families(text)}


def test_slurm_exporter_counts_equal_sinfo(mon):
    nodes = set(ssh(mon, "ctl", "sinfo -N -h -o %N").stdout.split())
    gres = ssh(mon, "ctl", "sinfo -N -h -O 'NodeList:|,Gres:|'").stdout
    sinfo_gpus = {line.split("|")[0]: int(re.search(r"gpu:\w+:(\d+)", line).group(1)) for line in gres.splitlines()}
    m = exporter_metrics(mon)
    assert sum(s.value for s in m["corral_slurm_nodes"]) == len(nodes) == 2
    assert {s.labels["node"] for s in m["corral_slurm_node_state"]} == nodes
    per_node = {s.labels["node"]: s.value for s in m["corral_slurm_node_gpus"]}
    assert per_node == sinfo_gpus == {"gpu01": 4, "gpu02": 4}
    assert sum(s.value for s in m["corral_slurm_partition_gpus"]) == sum(sinfo_gpus.values())
    assert [s.value for s in m["corral_slurm_slurmctld_up"]] == [1] and [s.value for s in m["corral_slurm_slurmdbd_up"]] == [1]
    # the same numbers reach Prometheus
    wait_for("exporter in Prometheus", lambda: query(mon, "sum(corral_slurm_node_gpus)")["data"]["result"])
    assert query(mon, "sum(corral_slurm_node_gpus)")["data"]["result"][0]["value"][1] == "8"


def test_health_and_spec_gpu_counts_reach_prometheus(mon):
    ssh(mon, "gpu01", "/usr/local/sbin/corral-health >/dev/null || true")
    found = wait_for("corral_node_gpus_found{node=gpu01}",
                     lambda: query(mon, 'corral_node_gpus_found{node="gpu01"}')["data"]["result"])
    assert found[0]["value"][1] == "4"
    expected = query(mon, "corral_node_gpus_expected")["data"]["result"]
    assert {r["metric"]["node"]: r["value"][1] for r in expected} == {"ctl": "0", "gpu01": "4", "gpu02": "4"}


def shipped_expressions(vc) -> list[tuple[str, str]]:
    out = [(f"rule {r['alert']}", r["expr"])
           for r in YAML(typ="safe").load(render_rules(vc.cluster))["groups"][0]["rules"]]
    for name, text in dashboards().items():
        for panel in json.loads(text)["panels"]:
            for target in panel["targets"]:
                expr = target["expr"]
                for var, value in GRAFANA_VARS.items():
                    expr = expr.replace(var, value)
                out.append((f"{name}: {panel['title']}", expr))
    return out


def test_every_shipped_promql_expression_evaluates(mon):
    exprs = shipped_expressions(mon)
    assert len(exprs) > 40
    errors = []
    for where, expr in exprs:
        try:
            answer = query(mon, expr)
            if answer["status"] != "success":
                errors.append(f"{where}: {answer}")
        except urllib.error.HTTPError as e:
            errors.append(f"{where}: {expr}: HTTP {e.code}: {e.read().decode()[:200]}")
    assert errors == []
    # the Slurm panels have data on this cluster (DCGM panels cannot: no DCGM on emulated GPUs)
    for expr in ("sum by (partition, state) (corral_slurm_partition_gpus)", "corral_slurm_nodes",
                 "sum by (job) (up)"):
        assert query(mon, expr)["data"]["result"], expr


def test_plan_says_why_grafana_and_dcgm_exporter_are_not_installed(mon, capsys):
    assert main(["plan", "-v", "-f", str(mon.cluster.path)]) == 0  # -v: the components skipped, with why
    out = capsys.readouterr().out
    assert "grafana | Grafana: skipped: virtual cluster: Grafana comes from Grafana's package repository" in out
    assert "dcgm-exporter (GPU metrics): skipped: virtual cluster: its GPUs are emulated" in out
    assert "\n  ~ " not in out and "plan: 0 change(s) on 0 of " in out  # converged: nothing to do


def test_render_writes_the_files_the_apply_journaled(mon, tmp_path):
    """corral render (issue 48): per node, the files the run's record says this module's apply wrote or kept (each op's
    declared files: path, sha256) are what the nodes hold and exactly what `corral render` writes, with the same
    digests; a secret has no digest and render a placeholder; a file made on the node is named in NOTES.txt."""
    import hashlib
    import shlex

    from corral.deploy.installs import BLOCK
    from corral.engine import journal
    from corral.workflows.render_files import _safe, render
    state = mon.cluster.state_dir
    run = next(r for r in journal.recent(state, 50) if r["command"] == "test-monitoring-apply" and r["mode"] == "apply")
    row = journal.get(state, run["run_id"])
    assert row is not None and row["ok"]
    done = render(mon.cluster, tmp_path / "out")
    notes = "\n".join(done["notes"])
    for node, data in row["nodes"].items():
        recorded = {f["path"]: f for o in data["ops"] if o["status"] in ("changed", "unchanged")
                    for f in o.get("files", [])}
        whole = sorted(p for p, f in recorded.items() if f["sha256"] and not p.endswith(BLOCK))
        out = ssh(mon, node, "sha256sum -z " + " ".join(shlex.quote(p) for p in whole)).stdout  # -z: names as they are
        on_node = {path: digest for digest, path in (item.split("  ", 1) for item in out.split("\0") if item)}
        assert {p: recorded[p]["sha256"] for p in whole} == on_node, node
        written = set(done["files"].get(node, []))
        assert written == {p for p, f in recorded.items() if not f["from_node"]}, (node, written ^ set(recorded))
        assert [p for p, f in recorded.items() if f["from_node"] and p not in notes] == [], node
        for path in written:
            ours, f = (tmp_path / "out" / node / _safe(path)).read_bytes(), recorded[path]
            if f["secret"]:
                assert f["sha256"] is None and b"<secret:not-rendered:" in ours, (node, path)
            else:
                assert hashlib.sha256(ours).hexdigest() == f["sha256"], (node, path)


def test_stopping_slurmd_raises_an_alert_in_alertmanager(mon):
    def alert():
        alerts = get(mon, 9093, "/api/v2/alerts")
        return [a for a in alerts if a["labels"].get("alertname") == "SlurmdDown"
                and a["labels"].get("node") == "gpu02"]
    assert not alert()
    ssh(mon, "gpu02", "systemctl stop slurmd")
    try:
        fired = wait_for("SlurmdDown for gpu02 in Alertmanager", alert, timeout=90)
        assert fired[0]["labels"]["severity"] == "critical" and fired[0]["labels"]["cluster"] == mon.cluster.name
        assert fired[0]["annotations"]["summary"] == "slurmd is not running on gpu02"
        assert fired[0]["status"]["state"] == "active"
    finally:
        ssh(mon, "gpu02", "systemctl start slurmd")
    wait_for("gpu02 back", lambda: "idle" in ssh(mon, "ctl", "sinfo -h -n gpu02 -o %T").stdout, timeout=60)


def test_prolog_and_epilog_keep_the_gpu_job_mapping(mon):
    job = ssh(mon, "ctl", "sbatch --parsable -A research -w gpu01 --gres=gpu:h100:2 --wrap 'sleep 30'").stdout.strip()
    try:
        def mapped():
            out = ssh(mon, "gpu01", "grep -H . /run/corral/gpu-jobs/* 2>/dev/null", check=False).stdout
            return out if job in out else None
        files = wait_for(f"job {job} in the GPU job map", mapped, timeout=30)
        assert sorted(files.split()) == [f"/run/corral/gpu-jobs/0:{job}", f"/run/corral/gpu-jobs/1:{job}"]
    finally:
        ssh(mon, "ctl", f"scancel {job}")
    wait_for("mapping files removed by the epilog",
             lambda: ssh(mon, "gpu01", "ls -A /run/corral/gpu-jobs").stdout.strip() == "", timeout=30)
