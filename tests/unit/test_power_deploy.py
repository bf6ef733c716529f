"""The power deploy: on controllers only, when power.enabled (the ops in order, before the slurm
controller deploy in components()); planned through the engine against the private sshd on loopback,
the BMC credentials file is a secret (0600 slurm:slurm) whose content is in no plan diff, result or
journal; a missing credentials file is a clear error naming it."""

from __future__ import annotations

import json
import sqlite3
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from conftest_engine import make_cluster, sshd  # noqa: E402,F401
from deploy_ops import planned_ops  # noqa: E402

from corral.components.slurm import COMPONENTS  # noqa: E402
from corral.deploy import components, deploy_of  # noqa: E402
from corral.render.power import credentials, wrapper  # noqa: E402
from corral.engine import journal  # noqa: E402
from corral.engine.runner import run  # noqa: E402
from corral.errors import CorralError  # noqa: E402
from corral.spec.loader import load_text  # noqa: E402

PASSWORD = "Bmc-Pw-4kQ9zL"
power = deploy_of(next(c for c in COMPONENTS if c.name == "power"))  # declared as data: the generic deploy
POWER = """\
power:
  enabled: true
  bmc:
    credentials_file: bmc.cred
    nodes:
      - {names: "cn1,down1", addresses: "10.9.0.11,10.9.0.12"}
"""
SPEC = """\
name: lab
nodes:
  - {names: ctl1, addresses: [10.0.0.10], roles: [controller]}
  - {names: "cn[1-2]", addresses: "10.0.0.[11-12]", roles: [compute]}
power:
  enabled: true
  bmc:
    credentials_file: bmc.cred
    nodes:
      - {names: "cn[1-2]", addresses: "10.9.0.[11-12]"}
"""
EXPECTED = ["slurmctld installed (the slurm user runs the power programs)", "/usr/local/lib/corral",
            "/usr/local/lib/corral/power.py", "/usr/local/lib/corral/power_redfish.py",
            "/usr/local/sbin/corral-power-suspend", "/usr/local/sbin/corral-power-resume",
            "/usr/local/sbin/corral-power-resume-fail", "/etc/corral/power.json",
            "/etc/corral/bmc-credentials (secret)"]


def test_ops_on_the_controller_only(tmp_path):
    (tmp_path / "bmc.cred").write_text(f"admin:{PASSWORD}\n")
    ops = planned_ops(tmp_path, SPEC, [power], labelled=False)
    assert ops == {"ctl1": EXPECTED, "cn1": [], "cn2": []}
    assert planned_ops(tmp_path, SPEC.replace("enabled: true", "enabled: false"), [power]) == \
        {"ctl1": [], "cn1": [], "cn2": []}


def test_power_comes_before_the_slurm_controller(tmp_path):
    (tmp_path / "bmc.cred").write_text(f"admin:{PASSWORD}\n")
    names = [d.deploy_name for d in components(load_text(SPEC, str(tmp_path / "cluster.yaml")))]
    assert names.index("power") < names.index("slurm controller")


def test_wrapper_runs_the_program_with_slurms_hostlist():
    assert wrapper("resume").splitlines()[-1] == 'exec /usr/bin/python3 /usr/local/lib/corral/power.py resume "$@"'


def test_credentials_read_bounded_and_first_line_only(tmp_path):
    cred = tmp_path / "bmc.cred"
    cred.write_text(f"admin:{PASSWORD}\n# a comment line\n")
    cluster = load_text(SPEC, str(tmp_path / "cluster.yaml"))
    assert credentials(cluster) == f"admin:{PASSWORD}\n"
    cred.write_text("")
    with pytest.raises(CorralError, match="BMC credentials file is empty") as err:
        credentials(cluster)
    assert str(cred) in str(err.value.where)


def test_plan_never_shows_the_credentials(tmp_path, sshd):  # noqa: F811
    (tmp_path / "bmc.cred").write_text(f"admin:{PASSWORD}\n")
    cluster = make_cluster(tmp_path, sshd, extra=POWER)
    plan = run(cluster, [power], mode="plan", limit=["ctl1"])
    assert plan.ok, json.dumps(plan.to_json(), indent=1)[:4000]
    ops = {o.name: o for o in plan.nodes["ctl1"].ops}
    assert not Path("/etc/corral/bmc-credentials").exists(), "this machine is no corral controller"
    assert ops["power | /etc/corral/bmc-credentials (secret)"].status == "changed"
    text = json.dumps(plan.to_json())
    assert PASSWORD not in text
    assert "/etc/corral/bmc-credentials: secret content differs (not shown)" in text
    assert "https://10.9.0.11" in text  # power.json's diff is shown: it holds no secret
    dump = "\n".join(sqlite3.connect(journal.journal_path(cluster.state_dir)).iterdump())
    assert PASSWORD not in dump
