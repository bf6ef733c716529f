"""Package upgrades under the rollout policy (workflows/upgrade_rollout.py) against a scripted cluster
of four GPU nodes whose package versions follow the installs: the planned versions installed exactly,
a reboot only when the node asks, a failed verification rolled back to the old versions, a stop after
the canary, and old versions no longer installable leaving the node drained."""

from __future__ import annotations

import re
import shlex
import subprocess

import pytest

import corral.workflows.upgrade_rollout as U
from tests.unit.fakes import Clock, SlurmController, seam
from corral.engine.results import NodeResult, RunResult
from corral.spec.loader import load_text
from corral.workflows.node_rollout import Env, roll_out

SPEC = """\
name: lab
nodes:
  - {names: ctl, addresses: [10.0.0.10], roles: [controller, accounting]}
  - {names: "gpu[01-04]", addresses: 10.0.0.11-14, roles: [compute], gpus: {model: h100, count: 2}}
packages: {upgrade: all}
rollout: {batch: "50%", drain_timeout: 60}
"""
NODES = ["gpu01", "gpu02", "gpu03", "gpu04"]



class Fleet(SlurmController):
    """corral-test-tool at 1.0-1 everywhere, 1.1-1 offered; `breaks`: (node, version) pairs after whose
    install slurmd is no longer active; `reboot_after`: versions that ask for a reboot."""

    def __init__(self, offered="1.1-1", breaks=(), reboot_after=(), gone=()):
        super().__init__()
        self.tool = {n: "1.0-1" for n in NODES}
        self.offered, self.breaks, self.reboot_after, self.gone = offered, set(breaks), set(reboot_after), set(gone)
        self.asks_reboot: set[str] = set()

    def __call__(self, cluster, node, command, *, timeout=120, check=False, input=None):
        return subprocess.CompletedProcess(command, *self.answer(node, command))

    def answer(self, node, command):
        if node == "ctl":
            return self.controller(command)
        if command.startswith(f"mkdir -p {U.command().split()[2]}"):  # the simulation
            have = self.tool[node]
            return 0, (f"Inst corral-test-tool [{have}] ({self.offered} . [all])\n" if have != self.offered else ""), ""
        if "apt-get update" in command and " install " in command:
            pins = dict(p.split("=", 1) for p in re.findall(r"corral-test-tool=\S+", command))
            version = pins.get("corral-test-tool")
            self.log.append((node, f"install {version}"))
            if version in self.gone:
                return 100, "", f"E: Version '{version}' for 'corral-test-tool' was not found"
            if version:
                self.tool[node] = version
                if version in self.reboot_after:
                    self.asks_reboot.add(node)
            return 0, "", ""
        if command == U.REBOOT_DUE:
            return (0 if node in self.asks_reboot else 1), "", ""
        if "systemctl reboot" in command:
            self.log.append((node, "reboot"))
            self.asks_reboot.discard(node)
            return 0, "", ""
        if command.startswith("[ \"$(dpkg-query"):
            want = re.findall(r"= '?([^' \]]+)'? \]", command)
            return 0, ("" if self.tool[node] == want[0] else "corral-test-tool\n"), ""
        if command == "dpkg --audit":
            return 0, "", ""
        if command == "systemctl is-active slurmd munge":
            bad = (node, self.tool[node]) in self.breaks
            return (3, "failed\nactive\n", "") if bad else (0, "active\nactive\n", "")
        if command == "nvidia-smi -L":
            return 0, "GPU 0: H100 (UUID: a)\nGPU 1: H100 (UUID: b)\n", ""
        return 0, "", ""  # the reboot marker gone with slurmd active


@pytest.fixture
def fleet():
    clock = Clock()

    def setup(fake: Fleet, spec: str = SPEC):
        cluster = load_text(spec, "cluster.yaml")
        result = RunResult(run_id="r", command="apply", mode="apply", spec_hash="x", started="t",
                           nodes={n.name: NodeResult(node=n.name, address=n.address) for n in cluster.nodes})
        return roll_out(U.PACKAGES, cluster, result, NODES, Env(run=seam(fake), clock=clock)), result
    return setup


def steps(result, node):
    return [(o.name.removeprefix("package upgrade | "), o.status) for o in result.nodes[node].ops]


def test_all_good_the_planned_version_everywhere_no_reboot_unless_asked(fleet):
    fake = Fleet(reboot_after={"1.1-1"})
    went, result = fleet(fake)
    assert went and result.ok and set(fake.tool.values()) == {"1.1-1"} and not fake.reason
    assert steps(result, "gpu01") == [("drain", "changed"), ("wait for jobs", "changed"), ("upgrade", "changed"),
                                      ("reboot", "changed"), ("verify", "changed"), ("resume", "changed")]
    assert "corral-test-tool 1.0-1 -> 1.1-1" in result.nodes["gpu01"].ops[2].reason
    fake = Fleet()
    went, result = fleet(fake)
    assert went and "reboot" not in [s for s, _ in steps(result, "gpu03")]


def test_a_canary_that_breaks_slurmd_is_rolled_back_and_the_rest_untouched(fleet):
    fake = Fleet(breaks={("gpu01", "1.1-1")})
    went, result = fleet(fake)
    assert not went and fake.tool == {n: "1.0-1" for n in NODES} and not fake.reason
    assert steps(result, "gpu01")[-4:] == [("verify", "failed"), ("rollback install", "changed"),
                                           ("rollback verify", "changed"), ("rollback resume", "changed")]
    assert "slurmd/munge not active" in result.nodes["gpu01"].error
    assert result.nodes["gpu01"].error.endswith("(rolled back to the old versions, verified and resumed)")
    assert [steps(result, n) for n in NODES[1:]] == [[("not started", "skipped")]] * 3
    assert {n for n, _ in fake.log} == {"gpu01"}


def test_old_versions_gone_leave_the_node_drained_with_the_reason(fleet):
    fake = Fleet(breaks={("gpu01", "1.1-1")}, gone={"1.0-1"})
    went, result = fleet(fake)
    assert steps(result, "gpu01")[-1] == ("rollback install", "failed")
    assert "the old versions are not installable" in result.nodes["gpu01"].error
    assert fake.reason["gpu01"].startswith("corral: package upgrade verify failed")


def test_install_script_installs_exactly_the_planned_versions_quoted():
    script = U.install_script([("libssl3", "3.0.13-1~deb12u2"), ("x", "1:2.0")], downgrade=True)
    assert ("apt-get install -y -q --no-install-recommends --allow-downgrades -o Dpkg::Options::=--force-confold "
            "'libssl3=3.0.13-1~deb12u2' x=1:2.0") in script
    assert shlex.split(script)  # a valid shell line
    check = U.installed_check([("libssl3", "3.0.13-1~deb12u2")])
    out = subprocess.run(["sh", "-c", check.replace("dpkg-query", "false")], capture_output=True, text=True)
    assert out.stdout.split() == ["libssl3"]  # not installed: named


def test_the_reboot_test_runs_under_sh():
    assert subprocess.run(["sh", "-n", "-c", U.REBOOT_DUE]).returncode == 0


def test_no_output_means_nothing_to_upgrade_not_none():
    """pyinfra answers default() for an empty output (a converged node prints nothing)."""
    from corral.facts.apt_upgrades import AptHolds, AptState, AptUpgrades
    assert AptUpgrades.default() == AptState((), False) and AptHolds.default() == ((), (), ())
