"""Alert rules and Alertmanager config: checked and unit-tested with the real promtool/amtool
(from Debian's prometheus and prometheus-alertmanager packages; scripts/bootstrap.sh puts them
in .venv/bin)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from corral.render.alertmanager import render_alertmanager_yml
from corral.render.alerts import render_rules, rules
from corral.spec.loader import load_text

HERE = Path(__file__).parent
SPEC = """\
name: lab
nodes:
  - {names: ctl, addresses: [10.0.0.10], roles: [controller, accounting, monitoring]}
  - {names: "gpu[01-02]", addresses: "10.0.0.[11-12]", roles: [compute], gpus: {model: h100, count: 4}}
"""


def tool(name: str) -> str:
    found = shutil.which(name) or shutil.which(name, path=str(Path(sys.executable).parent))
    if not found:
        if os.environ.get("CI"):
            pytest.fail(f"{name} missing: scripts/bootstrap.sh installs it into .venv/bin")
        pytest.skip(f"{name} not installed (run scripts/bootstrap.sh test)")
    return found


def test_rules_pass_promtool_check(tmp_path):
    path = tmp_path / "corral.yml"
    path.write_text(render_rules(load_text(SPEC, "cluster.yaml")))
    out = subprocess.run([tool("promtool"), "check", "rules", str(path)], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
    assert f"SUCCESS: {len(rules(load_text(SPEC, 'cluster.yaml')))} rules found" in out.stdout


def test_every_alert_has_a_promtool_unit_test_and_they_pass(tmp_path):
    cluster = load_text(SPEC, "cluster.yaml")
    (tmp_path / "corral.yml").write_text(render_rules(cluster))
    text = (HERE / "promtool" / "alerts_test.yml").read_text().replace("[RULES]", "[corral.yml]")
    (tmp_path / "alerts_test.yml").write_text(text)
    tested = {t["alertname"] for case in YAML(typ="safe").load(text)["tests"] for t in case["alert_rule_test"]}
    assert tested == {r.alert for r in rules(cluster)}
    out = subprocess.run([tool("promtool"), "test", "rules", "alerts_test.yml"], cwd=tmp_path,
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr


def test_a_broken_expectation_fails_promtool(tmp_path):
    """The unit tests above can fail: a wrong expected summary is reported."""
    (tmp_path / "corral.yml").write_text(render_rules(load_text(SPEC, "cluster.yaml")))
    text = (HERE / "promtool" / "alerts_test.yml").read_text().replace("[RULES]", "[corral.yml]")
    (tmp_path / "t.yml").write_text(text.replace("slurmd is not running on gpu01", "slurmd is fine"))
    out = subprocess.run([tool("promtool"), "test", "rules", "t.yml"], cwd=tmp_path, capture_output=True, text=True)
    assert out.returncode != 0 and "SlurmdDown" in out.stdout + out.stderr


def test_test_profile_overrides_every_for():
    cluster = load_text(SPEC + "monitoring: {alerts: {for_s: 5}}\n", "cluster.yaml")
    doc = YAML(typ="safe").load(render_rules(cluster))
    assert {r["for"] for r in doc["groups"][0]["rules"]} == {"5s"}
    default = YAML(typ="safe").load(render_rules(load_text(SPEC, "cluster.yaml")))
    assert {r["alert"]: r["for"] for r in default["groups"][0]["rules"]}["NodeDown"] == "2m"


def test_gpu_temperature_limit_comes_from_the_health_spec():
    cluster = load_text(SPEC + "health: {max_gpu_temp_c: 78}\n", "cluster.yaml")
    rule = next(r for r in rules(cluster) if r.alert == "GpuTemperatureHigh")
    assert rule.expr == "DCGM_FI_DEV_GPU_TEMP > 78" and "limit 78 C" in rule.summary


RECEIVERS = """\
monitoring:
  alerts:
    smtp: {smarthost: "mail.example.org:587", sender: "corral@example.org"}
    receivers:
      - {name: oncall, webhook: "https://hooks.example.org/corral", severities: [critical]}
      - {name: hpc-team, email: "hpc@example.org"}
"""


@pytest.mark.parametrize("extra", ["", RECEIVERS], ids=["no-receivers", "webhook-and-email"])
def test_alertmanager_config_passes_amtool(tmp_path, extra):
    path = tmp_path / "alertmanager.yml"
    path.write_text(render_alertmanager_yml(load_text(SPEC + extra, "cluster.yaml")))
    out = subprocess.run([tool("amtool"), "check-config", str(path)], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr


def test_alerts_are_routed_by_severity(tmp_path):
    path = tmp_path / "alertmanager.yml"
    path.write_text(render_alertmanager_yml(load_text(SPEC + RECEIVERS, "cluster.yaml")))

    def route(*labels):
        out = subprocess.run([tool("amtool"), "config", "routes", "test", f"--config.file={path}", *labels],
                             capture_output=True, text=True)
        return out.stdout.strip()

    assert route("severity=critical", "alertname=NodeDown") == "oncall,hpc-team"
    assert route("severity=warning", "alertname=ClockSkew") == "hpc-team"
    assert route("alertname=Unlabelled") == "none"


def test_email_receiver_without_a_mail_server_is_a_located_error():
    from corral.errors import SpecError
    bad = SPEC + "monitoring:\n  alerts:\n    receivers:\n      - {name: team, email: hpc@example.org}\n"
    with pytest.raises(SpecError) as e:
        load_text(bad, "cluster.yaml")
    assert "cluster.yaml:8:29" in str(e.value) and "monitoring.alerts.smtp" in str(e.value)


def test_receiver_needs_exactly_one_target():
    from corral.errors import SpecError
    bad = SPEC + "monitoring:\n  alerts:\n    receivers:\n      - {name: team}\n"
    with pytest.raises(SpecError) as e:
        load_text(bad, "cluster.yaml")
    assert "exactly one of `webhook`" in str(e.value)
