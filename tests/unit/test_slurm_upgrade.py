"""A Slurm upgrade (workflows/slurm_upgrade.py) against a scripted cluster whose Slurm versions
follow the installs: backup, slurmdbd, slurmctld, then slurmd in the rollout policy's batches; a
failed backup or a slurmdbd that does not come back stops everything after it; a slurmd canary that
does not come back stops the batches with the cluster working; plan's line shows the order."""

from __future__ import annotations

import re
import shlex
import subprocess
from types import SimpleNamespace

import pytest

import corral.workflows.slurm_daemons as D
import corral.workflows.slurm_upgrade as U
from corral.deploy.slurm_version import UPGRADE
from corral.engine.results import NodeResult, OpResult, RunResult
from corral.spec.loader import load_text
from corral.spec.rules_rollout import policy
from corral.engine.handoff import SLURM, Handoff
from corral.workflows.node_rollout import Env, pending, roll_out
from tests.unit.fakes import seam

SPEC = """\
name: lab
nodes:
  - {names: ctl, addresses: [10.0.0.10], roles: [controller]}
  - {names: db, addresses: [10.0.0.9], roles: [accounting]}
  - {names: "gpu[01-04]", addresses: 10.0.0.11-14, roles: [compute], gpus: {model: h100, count: 2}}
slurm: {version: "23.02"}
rollout: {batch: "50%", drain_timeout: 60}
"""
NODES = ["ctl", "db", "gpu01", "gpu02", "gpu03", "gpu04"]
DAEMON = {"ctl": "slurmctld", "db": "slurmdbd"}


class Clock:
    def __init__(self):
        self.now = 0.0

    def monotonic(self):
        return self.now

    def sleep(self, seconds):
        self.now += seconds


class Cluster:
    """22.05.8 everywhere, 23.02.7 in the repositories; `dead`: daemons that do not answer after a
    start at the new version; the log: (node, action) in the order they happened."""

    def __init__(self, dead=()):
        self.installed = {n: "22.05.8" for n in NODES}
        self.running = {n: "22.05.8" for n in NODES}  # each node's daemon: slurmctld, slurmdbd, slurmd
        self.dead, self.reason, self.log = set(dead), {}, []

    def __call__(self, cluster, node, command, *, timeout=120, check=False, input=None):
        return subprocess.CompletedProcess(command, *self.answer(node, command))

    def answer(self, node, command):
        words = command.split()
        if command.startswith("systemctl "):
            self.log.append((node, f"{words[1]} {words[2]}"))
            if words[1] == "stop":
                self.running[node] = ""
            elif (node, self.installed[node]) not in self.dead:
                self.running[node] = self.installed[node]
            return 0, "", ""
        if "apt-get install" in command:
            wanted = re.search(r"Pin: version (\S+)\.\*", command).group(1)
            self.log.append((node, f"install {wanted}"))
            self.installed[node] = "23.02.7" if wanted == "23.02" else self.installed[node]
            return 0, "", ""
        if command == D.INSTALLED_VERSION:  # dpkg-query's line (facts/slurm.py, the one reader)
            return 0, f"ii {self.installed[node]}-1\n", ""
        if words[1:] == ["-V"]:
            up = self.running[node] and words[0] == DAEMON.get(node, "slurmd")
            return (0, f"slurm {self.running[node]}\n", "") if up else (1, "", "not running")
        if command == D.READY["slurmdbd"]:
            return (0, "lab\n", "") if self.running["db"] else (1, "", "sacctmgr: error: Problem talking to the database")
        if command == D.READY["slurmctld"]:
            return (0, "", "") if self.running["ctl"] else (1, "", "")
        if command.startswith("scontrol show node"):
            n = shlex.split(command)[-1]
            r = f" Reason={self.reason[n]} [root@x]" if n in self.reason else ""
            state = "IDLE" + ("+DRAIN" if r else "") + ("" if self.running[n] else "+NOT_RESPONDING")
            return 0, f"NodeName={n} State={state}{r}\n", ""
        if command.startswith("scontrol update"):
            w = shlex.split(command)
            n = w[2].split("=", 1)[1]
            self.log.append((n, w[3]))
            if w[3] == "state=drain":
                self.reason[n] = w[-1].split("=", 1)[1]
            else:
                self.reason.pop(n, None)
            return 0, "", ""
        return 0, "", ""  # squeue: no jobs


def marked(cluster) -> RunResult:
    """The components' apply as deploy/slurm_version.py leaves it: every node marked for the upgrade."""
    result = RunResult(run_id="r", command="apply", mode="apply", spec_hash="x", started="t",
                       nodes={n.name: NodeResult(node=n.name, address=n.address) for n in cluster.nodes})
    for n in result.nodes.values():
        n.ops.append(OpResult(name="Slurm version pinned", status="changed", disruption=UPGRADE,
                              diff="Slurm 22.05.8 -> 23.02\n(after the other components: ...)\n",
                              rollout=Handoff(SLURM, "22.05.8", "23.02")))
    return result


@pytest.fixture
def upgrade():
    clock = Clock()

    def go(fake: Cluster, backup_ok: bool = True):
        cluster = load_text(SPEC, "cluster.yaml")
        result = marked(cluster)

        def backup(c):
            fake.log.append(("local", "backup"))
            return SimpleNamespace(ok=backup_ok, file="/backups/lab.tar" if backup_ok else None,
                                   error=None if backup_ok else "mysqldump failed on db")
        return roll_out(U.SLURM, cluster, result, pending(result, SLURM), Env(run=seam(fake), clock=clock,
                                                                                backup=backup)), result
    return go


def first(log, entry):
    return log.index(entry)


def test_slurms_order_backup_slurmdbd_slurmctld_then_slurmd_in_batches(upgrade):
    fake = Cluster()
    went, result = upgrade(fake)
    assert went and result.ok and set(fake.installed.values()) == {"23.02.7"} and not fake.reason
    log = fake.log
    assert log[:7] == [("local", "backup"), ("db", "stop slurmdbd"), ("db", "install 23.02"), ("db", "start slurmdbd"),
                       ("ctl", "stop slurmctld"), ("ctl", "install 23.02"), ("ctl", "start slurmctld")]
    gpu_first = min(i for i, (n, _) in enumerate(log) if n.startswith("gpu"))
    assert gpu_first == 7 and log[7] == ("gpu01", "state=drain")
    assert log[7:12] == [("gpu01", "state=drain"), ("gpu01", "stop slurmd"), ("gpu01", "install 23.02"),
                         ("gpu01", "start slurmd"), ("gpu01", "state=resume")]
    assert [(b["batch"], b["nodes"]) for b in result.rollouts] == [
        ("canary", ["gpu01"]), ("batch 2", ["gpu02", "gpu03"]), ("batch 3", ["gpu04"])]
    assert [o.name for o in result.nodes["gpu02"].ops[1:]] == [
        "slurm upgrade | drain", "slurm upgrade | wait for jobs", "slurm upgrade | install", "slurm upgrade | resume"]
    assert result.nodes["gpu02"].ops[3].reason == "slurmd 23.02.7 responding"


def test_a_failed_backup_stops_before_anything_changes(upgrade):
    fake = Cluster()
    went, result = upgrade(fake, backup_ok=False)
    assert not went and fake.log == [("local", "backup")] and set(fake.installed.values()) == {"22.05.8"}
    assert "backup failed: mysqldump failed on db; nothing was upgraded" in result.nodes["db"].error


def test_a_slurmdbd_that_does_not_come_back_stops_before_slurmctld(upgrade):
    fake = Cluster(dead={("db", "23.02.7")})
    went, result = upgrade(fake)
    assert not went and [n for n, _ in fake.log] == ["local", "db", "db", "db"]
    assert fake.installed["ctl"] == "22.05.8" and fake.running["ctl"] == "22.05.8"
    error = result.nodes["db"].error
    assert f"slurmdbd on db not answering within {D.DBD_TIMEOUT_S} s" in error
    assert "not rolled back" in error and "slurmctld and slurmd not touched" in error
    assert all(result.nodes[n].ok for n in NODES if n != "db")


def test_a_slurmd_canary_that_does_not_respond_stops_with_the_cluster_working(upgrade):
    fake = Cluster(dead={("gpu01", "23.02.7")})
    went, result = upgrade(fake)
    assert not went and fake.installed["ctl"] == fake.installed["db"] == "23.02.7"
    assert {fake.installed[n] for n in ("gpu02", "gpu03", "gpu04")} == {"22.05.8"}
    assert "slurmd on gpu01 not answering" in result.nodes["gpu01"].error
    assert fake.reason["gpu01"].startswith("corral: slurm upgrade wait failed")  # left drained, with the reason
    assert [o.name for o in result.nodes["gpu03"].ops[1:]] == ["slurm upgrade | not started"]
    assert any("older slurmd, which Slurm supports: the cluster works" in w for w in result.warnings)


def test_a_slurm_node_that_failed_in_the_components_means_no_upgrade(upgrade):
    fake = Cluster()
    cluster = load_text(SPEC, "cluster.yaml")
    result = marked(cluster)
    result.nodes["gpu03"].error = "slurm.version: slurm.version 23.02: gpu03 runs 21.08.8; ..."
    assert not roll_out(U.SLURM, cluster, result, pending(result, SLURM),
                        Env(run=seam(fake), clock=Clock(), backup=lambda c: pytest.fail("no backup")))
    assert fake.log == [] and "gpu03 failed or did not answer" in result.warnings[0]


def test_plan_shows_the_order():
    cluster = load_text(SPEC, "cluster.yaml")
    entry = U.planned(cluster, marked(cluster), NODES, policy(cluster.spec))
    assert entry["what"] == "slurm upgrade" and entry["state"] == "planned"
    assert entry["summary"] == ("22.05.8 -> 23.02: backup, slurmdbd on db, slurmctld on ctl, then slurmd: "
                                "canary gpu01 -> batch 2 gpu[02-03] -> batch 3 gpu04; stops at 1 failed node "
                                "(any in the canary)")


def test_a_limited_run_upgrades_nothing():
    fake = Cluster()
    cluster = load_text(SPEC, "cluster.yaml")
    result = marked(cluster)
    del result.nodes["gpu04"]  # apply --limit gpu[01-03]
    assert not roll_out(U.SLURM, cluster, result, pending(result, SLURM),
                        Env(run=seam(fake), clock=Clock(), backup=lambda c: pytest.fail("no backup")))
    assert fake.log == [] and "--limit" in result.warnings[0]


def test_a_controller_that_is_also_a_compute_node_gets_its_slurmd_step():
    cluster = load_text(SPEC.replace("roles: [controller]", "roles: [controller, compute]"), "cluster.yaml")
    entry = U.planned(cluster, marked(cluster), NODES, policy(cluster.spec))
    assert entry["summary"].startswith("22.05.8 -> 23.02: backup, slurmdbd on db, slurmctld on ctl, then slurmd: "
                                       "canary ctl -> ")


def test_a_slurmdbd_install_that_fails_starts_the_old_one_again(upgrade, monkeypatch):
    fake = Cluster()
    answer = fake.answer

    def failing(node, command):
        if node == "db" and "apt-get install" in command:
            fake.log.append((node, "install failed"))
            return 100, "", "E: Unable to locate package"
        return answer(node, command)
    monkeypatch.setattr(fake, "answer", failing)
    went, result = upgrade(fake)
    assert not went and fake.log[1:] == [("db", "stop slurmdbd"), ("db", "install failed"), ("db", "start slurmdbd")]
    assert "the new version never ran; slurmdbd on db started again" in result.nodes["db"].error
    assert fake.running["db"] == "22.05.8" and fake.installed["ctl"] == "22.05.8"


def test_a_slurmd_canary_whose_install_fails_part_way_is_put_back_as_it_was(upgrade, monkeypatch):
    """A broken slurmd package (its preinst fails): apt leaves some packages at the new version; the
    node's packages and pin from before are put back, its old slurmd started, and it stays drained."""
    fake = Cluster()
    answer, scripts = fake.answer, []
    old_pin = "# Managed by corral: Slurm stays at 22.05 until slurm.version changes\nPin: version 22.05.*\n"

    def broken(node, command):
        if command == D.BEFORE:
            return 0, f"{old_pin}{'-' * 8}\nslurmd=22.05.8-1\nslurm-wlm-basic-plugins=22.05.8-1\n", ""
        if node == "gpu01" and "apt-get install" in command and "--allow-downgrades" not in command:
            fake.log.append((node, "install failed part-way"))
            fake.installed[node] = "23.02.7"  # the plugins unpacked at the new version, slurmd not
            return 100, "", "E: Sub-process /usr/bin/dpkg returned an error code (1)"
        if node == "gpu01" and "--allow-downgrades" in command:
            scripts.append(command)
            fake.log.append((node, "put back"))
            fake.installed[node] = "22.05.8"
            return 0, "", ""
        return answer(node, command)
    monkeypatch.setattr(fake, "answer", broken)
    went, result = upgrade(fake)
    assert not went and fake.installed["gpu01"] == "22.05.8" and fake.running["gpu01"] == "22.05.8"
    assert fake.log[fake.log.index(("gpu01", "install failed part-way")):] == [
        ("gpu01", "install failed part-way"), ("gpu01", "put back"), ("gpu01", "start slurmd"), ("gpu01", "state=drain")]
    assert "slurmd=22.05.8-1 slurm-wlm-basic-plugins=22.05.8-1" in scripts[0]
    assert shlex.quote(old_pin) in scripts[0]  # the pin from before, not the new version's
    error = result.nodes["gpu01"].error
    assert "install failed" in error and "its Slurm packages put back as they were (2), slurmd started again" in error
    assert fake.reason["gpu01"].startswith("corral: slurm upgrade install failed")
    assert {fake.installed[n] for n in ("gpu02", "gpu03", "gpu04")} == {"22.05.8"}
