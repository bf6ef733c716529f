"""power: the spec section (off by default; located errors for a bad BMC mapping, a missing credentials
file, http without allow_http, a virtual cluster's BMC), what it renders into slurm.conf (and nothing
when off), SuspendExcNodes, the lint, and the power restart rule of deploy/slurm.py."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from corral.deploy.slurm import _structural
from corral.errors import SpecError
from corral.render.power import power_config, slurm_lines
from corral.render.slurm import render_slurm_conf
from corral.render.slurm_lint import lint_slurm_conf
from corral.spec.loader import load_text
from pydantic import TypeAdapter

from corral.spec.types import Duration
from corral.spec.rules_power import bmc_urls, excluded, virtual_bmc_listen

NODES = """\
name: lab
nodes:
  - {names: ctl, addresses: [10.0.0.10], roles: [controller]}
  - {names: "gpu[01-03]", addresses: "10.0.0.[11-13]", roles: [compute]}
"""
POWER = """\
power:
  enabled: true
  bmc:
    credentials_file: bmc.cred
    nodes:
      - {names: "gpu[01-03]", addresses: "10.1.0.[11-13]"}
"""


def load(tmp_path: Path, text: str):
    cred = tmp_path / "bmc.cred"
    if not cred.exists():
        cred.write_text("admin:pw\n")
    return load_text(textwrap.dedent(text), str(tmp_path / "cluster.yaml"))


def problems(tmp_path: Path, text: str) -> list[str]:
    with pytest.raises(SpecError) as err:
        load(tmp_path, text)
    return [f"{p.where}: {p.message}" for p in err.value.problems]


def test_off_by_default_renders_nothing(tmp_path):
    cluster = load(tmp_path, NODES)
    assert not cluster.spec.power.enabled and slurm_lines(cluster) == [] and bmc_urls(cluster) == {}
    text = render_slurm_conf(cluster, {})
    assert "Suspend" not in text and "Resume" not in text


def test_enabled_renders_programs_times_and_exclusions(tmp_path):
    cluster = load(tmp_path, NODES.replace("roles: [controller]", "roles: [controller, compute]") + POWER
                   .replace("enabled: true", "enabled: true\n  suspend_after: 30s\n  exclude: gpu03")
                   .replace('"gpu[01-03]", addresses: "10.1.0.[11-13]"', '"gpu[01-02]", addresses: "10.1.0.11,10.1.0.12"'))
    lines = slurm_lines(cluster)
    assert lines[2:] == ["SuspendProgram=/usr/local/sbin/corral-power-suspend",
                         "ResumeProgram=/usr/local/sbin/corral-power-resume",
                         "ResumeFailProgram=/usr/local/sbin/corral-power-resume-fail",
                         "SuspendTime=30", "SuspendTimeout=120", "ResumeTimeout=600", "SuspendExcNodes=ctl,gpu03"]
    assert excluded(cluster) == ["ctl", "gpu03"]
    text = render_slurm_conf(cluster, {})
    assert lint_slurm_conf(text) == []
    # switching power saving on or off restarts slurmctld (a reconfigure does not enable it)
    assert "SuspendProgram=/usr/local/sbin/corral-power-suspend" in _structural(text)
    config = json.loads(power_config(cluster))
    assert config["nodes"] == {"gpu01": "https://10.1.0.11", "gpu02": "https://10.1.0.12"}
    assert "pw" not in power_config(cluster) and config["credentials_file"] == "/etc/corral/bmc-credentials"


def test_lint_refuses_another_suspend_program():
    text = "ClusterName=x\nSuspendProgram=/tmp/evil\n"
    assert any("not one of corral's programs" in p for p in lint_slurm_conf(text))


@pytest.mark.parametrize("value, expected", [("30s", 30), ("30m", 1800), ("2h", 7200), (45, 45)])
def test_durations(value, expected):
    assert TypeAdapter(Duration).validate_python(value) == expected


@pytest.mark.parametrize("change, where, message", [
    (("bmc:\n", "bmc_missing:\n"), "power.bmc_missing", "bmc_missing"),
    (('"gpu[01-03]", addresses', '"gpu[01-02]", addresses'), "power.bmc.nodes[0].addresses", "2 names but 3"),
    (('addresses: "10.1.0.[11-13]"', 'addresses: "10.1.0.[11-13]", address: bmc1'), "power.bmc.nodes[0]",
     "either address"),
    (('"gpu[01-03]", addresses: "10.1.0.[11-13]"', '"gpu[01-02]", addresses: "10.1.0.[11-12]"'),
     "power.bmc.nodes", "no BMC for compute node gpu03"),
    (('"gpu[01-03]", addresses: "10.1.0.[11-13]"', '"ctl,gpu[01-03]", addresses: "10.1.0.[10-13]"'),
     "power.bmc.nodes[0].names", "ctl is not a compute node"),
    (("enabled: true", "enabled: true\n  suspend_after: 5s"), "power.suspend_after", "shorter than 10s"),
    (("enabled: true", "enabled: true\n  suspend_after: soon"), "power.suspend_after", "power.suspend_after: not a duration"),
    (("enabled: true", "enabled: true\n  exclude: gpu09"), "power.exclude", "gpu09 is not a compute node"),
    (("credentials_file: bmc.cred", "credentials_file: nowhere.cred"), "power.bmc.credentials_file", "no such file"),
    (("credentials_file: bmc.cred", "credentials_file: bmc.cred\n    scheme: http"), "power.bmc.scheme",
     "in clear"),
    (('addresses: "10.1.0.[11-13]"', 'address: "bmc;reboot"'), "power.bmc.nodes[0].address",
     "not host[:port]"),
])
def test_bad_power_sections_are_located(tmp_path, change, where, message):
    """Each problem names the file and a line of the power section (NODES is 4 lines), and what is wrong."""
    old, new = change
    assert old in POWER
    found = problems(tmp_path, NODES + POWER.replace(old, new, 1))
    line = next((p for p in found if message in p), None)
    assert line is not None, found
    prefix = f"{tmp_path / 'cluster.yaml'}:"
    assert line.startswith(prefix) and int(line[len(prefix):].split(":")[0]) > 4, line


def test_enabled_without_bmc_is_refused(tmp_path):
    found = problems(tmp_path, NODES + "power: {enabled: true}\n")
    assert any("without BMCs" in p for p in found), found


def test_two_entries_for_one_node_are_refused(tmp_path):
    text = NODES + POWER + '      - {names: gpu01, address: "bmc.example.com:443"}\n'
    assert any("gpu01 has a BMC already" in p for p in problems(tmp_path, text))


def test_http_allowed_with_allow_http(tmp_path):
    text = NODES + "allow_http: true\n" + POWER.replace("credentials_file:", "scheme: http\n    credentials_file:")
    assert bmc_urls(load(tmp_path, text))["gpu01"] == "http://10.1.0.11"


VIRTUAL = "virtual: {subnet: 10.213.77.0/24}\n"
VNODES = NODES.replace("10.0.0.10", "10.213.77.10").replace('"10.0.0.[11-13]"', '"10.213.77.[11-13]"')


def test_virtual_bmc_is_the_emulator_on_the_host_address(tmp_path):
    text = VNODES + VIRTUAL + POWER.replace('addresses: "10.1.0.[11-13]"', 'address: "10.213.77.1:18623"') \
        .replace("bmc.cred", ".corral/secrets/bmc-credentials").replace("credentials_file", "scheme: http\n    credentials_file")
    cluster = load(tmp_path, text)  # the credentials file does not exist yet: `virtual up` makes it
    assert virtual_bmc_listen(cluster) == ("10.213.77.1", 18623)
    assert bmc_urls(cluster)["gpu02"] == "http://10.213.77.1:18623"
    found = problems(tmp_path, text.replace("10.213.77.1:18623", "10.9.9.9:18623"))
    assert any("emulated one" in p for p in found), found
