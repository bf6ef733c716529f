"""The rollout policy (`rollout:`): the spec (durations, batch sizes, the deprecated nvidia.rollout),
the batches (canary first, stop at max_failed, untouched nodes named) and the driver rollback, against a
scripted cluster of four GPU nodes whose driver state follows installs and reboots."""

from __future__ import annotations

import re
import subprocess

import pytest

import corral.workflows.driver_rollout as R
import corral.workflows.slurm_node as S
from tests.unit.fakes import Clock, SlurmController, seam
from corral.workflows.node_rollout import Env, roll_out
from corral.engine.results import NodeResult, RunResult
from corral.errors import SpecError
from corral.spec.loader import load_text
from corral.spec.models_rollout import RolloutPolicy
from corral.spec.rules import spec_warnings
from corral.spec.rules_rollout import policy
from corral.workflows import batches

BASE = """\
name: lab
nodes:
  - {names: ctl, addresses: [10.0.0.10], roles: [controller, accounting]}
  - {names: "gpu[01-04]", addresses: 10.0.0.11-14, roles: [compute], gpus: {model: h100, count: 2}}
nvidia: {driver: {version: "2.0"}}
"""
NODES = ["gpu01", "gpu02", "gpu03", "gpu04"]


def spec(extra: str = ""):
    return load_text(BASE + extra, "cluster.yaml")


# --- the spec ----------------------------------------------------------------------------------

def test_defaults_are_one_canary_quarter_batches_stop_at_the_first_failure():
    p = policy(spec().spec)
    assert (p.canary, p.batch, p.max_failed, p.pause_s, p.drain_timeout, p.reboot_timeout, p.rollback) == \
        (1, "25%", 1, 0, 3600, 900, True)


@pytest.mark.parametrize(("text", "seconds"), [("90", 90), ("90s", 90), ("30m", 1800), ("2h", 7200), ("1d", 86400)])
def test_durations_take_units(text, seconds):
    assert policy(spec(f"rollout: {{drain_timeout: \"{text}\"}}\n").spec).drain_timeout == seconds


@pytest.mark.parametrize(("key", "value", "words"), [
    ("drain_timeout", '"2 h"', "not a duration"), ("drain_timeout", '"2h\\n"', "not a duration"),
    ("drain_timeout", '"8d"', "must be at most 604800"), ("reboot_timeout", "10", "must be at least 30"),
    ("batch", '"0%"', "not a batch size"), ("batch", '"101%"', "not a batch size"), ("batch", "0", "not a batch size"),
    ("batch", "true", "not a batch size"), ("batch", '"half"', "not a batch size"), ("max_failed", "0", "must be at least 1"),
])
def test_bad_values_are_located_errors(key, value, words):
    with pytest.raises(SpecError) as err:
        spec(f"rollout:\n  {key}: {value}\n")
    text = str(err.value)
    assert "cluster.yaml:7:" in text and words in text, text


def test_batch_sizes_are_counts_or_shares_rounded_up():
    assert RolloutPolicy(batch="25%").batch_size(4) == 1 and RolloutPolicy(batch="25%").batch_size(5) == 2
    assert RolloutPolicy(batch="100%").batch_size(7) == 7 and RolloutPolicy(batch=3).batch_size(100) == 3
    assert RolloutPolicy(batch="1%").batch_size(1) == 1


def test_the_older_nvidia_rollout_is_used_with_a_warning():
    c = load_text(BASE.replace('{driver: {version: "2.0"}}', '{driver: {version: "2.0"}, rollout: {parallel: 2, '
                                                             'drain_timeout_s: 60}}'), "cluster.yaml")
    p = policy(c.spec)
    assert (p.batch, p.drain_timeout, p.reboot_timeout, p.canary) == (2, 60, 900, 1)
    assert any("nvidia.rollout (drain_timeout_s, parallel) is deprecated" in w for w in spec_warnings(c))
    assert not any("deprecated" in w for w in spec_warnings(spec()))


def test_both_places_set_is_an_error_naming_the_fix():
    with pytest.raises(SpecError) as err:
        load_text(BASE.replace('{driver: {version: "2.0"}}', '{driver: {version: "2.0"}, rollout: {parallel: 2}}')
                  + "rollout: {batch: 1}\n", "cluster.yaml")
    assert "the rollout policy is set twice" in str(err.value) and "keep `rollout:` only" in str(err.value)


# --- batches -----------------------------------------------------------------------------------

@pytest.mark.parametrize(("kw", "expected"), [
    ({}, [("canary", ["gpu01"]), ("batch 2", ["gpu02"]), ("batch 3", ["gpu03"]), ("batch 4", ["gpu04"])]),
    ({"batch": "50%"}, [("canary", ["gpu01"]), ("batch 2", ["gpu02", "gpu03"]), ("batch 3", ["gpu04"])]),
    ({"canary": 0, "batch": 3}, [("batch 1", ["gpu01", "gpu02", "gpu03"]), ("batch 2", ["gpu04"])]),
    ({"canary": 2, "batch": "100%"}, [("canary", ["gpu01", "gpu02"]), ("batch 2", ["gpu03", "gpu04"])]),
])
def test_plan_puts_the_canary_first(kw, expected):
    assert batches.plan(NODES, RolloutPolicy(**kw)) == expected


def test_plan_describes_the_batches_in_one_line():
    p = RolloutPolicy(batch="50%")
    assert batches.planned("driver rollout", NODES, p)["summary"] == \
        "canary gpu01 -> batch 2 gpu[02-03] -> batch 3 gpu04; stops at 1 failed node (any in the canary)"


def run(p: RolloutPolicy, failing: set[str], clock: Clock | None = None):
    result = RunResult(run_id="r", command="apply", mode="apply", spec_hash="x", started="t",
                       nodes={n: NodeResult(node=n, address="a") for n in NODES})
    done: list[list[str]] = []

    def do_batch(nodes):
        done.append(nodes)
        return [n for n in nodes if n in failing]
    went = batches.run_batches("driver rollout", NODES, p, do_batch, result, disruption="reboot + drain",
                               clock=clock or Clock())
    return went, done, result


def test_a_failing_canary_stops_everything_else():
    went, done, result = run(RolloutPolicy(batch="50%", max_failed=3), {"gpu01"})
    assert not went and done == [["gpu01"]]
    for n in ("gpu02", "gpu03", "gpu04"):
        (op,) = result.nodes[n].ops
        assert (op.name, op.status) == ("driver rollout | not started", "skipped")
        assert op.reason.startswith("rollout stopped after the canary: the canary gpu01 failed")
    assert result.warnings == ["driver rollout: stopped after the canary (the canary gpu01 failed); not started on "
                               "gpu[02-04]: fix the cause, then apply again"]
    assert batches.not_started(result, "driver rollout") == {"gpu02", "gpu03", "gpu04"}
    assert [(b["batch"], b["failed"]) for b in result.rollouts] == [("canary", ["gpu01"])]


def test_a_failure_in_batch_two_stops_before_batch_three():
    went, done, result = run(RolloutPolicy(batch="50%"), {"gpu03"})
    assert not went and done == [["gpu01"], ["gpu02", "gpu03"]]
    assert [o.name for o in result.nodes["gpu04"].ops] == ["driver rollout | not started"]
    assert "1 failed node reached max_failed 1" in result.warnings[0]
    assert [r["batch"] for r in result.rollouts] == ["canary", "batch 2"]


def test_max_failed_lets_failures_below_it_through():
    went, done, result = run(RolloutPolicy(batch=1, max_failed=2), {"gpu02"})
    assert went and done == [["gpu01"], ["gpu02"], ["gpu03"], ["gpu04"]] and not result.warnings
    went, done, _ = run(RolloutPolicy(batch=1, max_failed=2), {"gpu02", "gpu03"})
    assert not went and done == [["gpu01"], ["gpu02"], ["gpu03"]]


def test_a_failure_in_the_last_batch_stops_nothing_more():
    slept = []
    clock = Clock()
    clock.sleep = slept.append
    went, done, result = run(RolloutPolicy(batch="50%", pause_s=30), {"gpu04"}, clock)
    assert went and done == [["gpu01"], ["gpu02", "gpu03"], ["gpu04"]] and not result.warnings
    assert slept == [30, 30]  # between batches, not before the first


# --- the driver rollback -----------------------------------------------------------------------


class Fleet(SlurmController):
    """The controller and gpu01..04: a driver package on disk and a running one per node; `broken`
    versions make nvidia-smi fail after the reboot into them."""

    def __init__(self, installed="1.0", broken=(), no_install=()):
        super().__init__()
        self.disk = {n: installed for n in NODES}
        self.running = dict(self.disk)
        self.broken, self.no_install = set(broken), set(no_install)

    def __call__(self, cluster, node, command, *, timeout=120, check=False, input=None):
        rc, out, err = self.answer(node, command)
        return subprocess.CompletedProcess(command, rc, out, err)

    def answer(self, node, command):
        if node == "ctl":
            return self.controller(command)
        if command.startswith("dpkg-query"):
            return (0, f"{self.disk[node]}-1", "") if self.disk[node] else (1, "", "no packages found")
        if "apt-get install" in command:
            version = re.search(r"Pin: version (\S+?)-\*", command).group(1)
            self.log.append((node, f"install {version}"))
            if node in self.no_install and version != self.disk[node]:
                return 100, "", "E: broken"
            self.disk[node] = version
            return 0, "", ""
        if "systemctl reboot" in command:
            self.log.append((node, "reboot"))
            self.running[node] = self.disk[node]
            return 0, "", ""
        if command.startswith("nvidia-smi --query-gpu"):
            v = self.running[node]
            return (9, "", "NVIDIA-SMI has failed") if v in self.broken else (0, f"{v}\n{v}\n", "")
        return 0, "", ""


@pytest.fixture
def fleet():
    clock = Clock()

    def setup(fake: Fleet, extra: str = "rollout: {batch: \"50%\", drain_timeout: 60}\n"):
        cluster = spec(extra)
        result = RunResult(run_id="r", command="apply", mode="apply", spec_hash="x", started="t",
                           nodes={n.name: NodeResult(node=n.name, address=n.address) for n in cluster.nodes})
        went = roll_out(R.DRIVER, cluster, result, NODES, Env(run=seam(fake), clock=clock))
        return went, result
    setup.clock = clock
    return setup


def steps(result, node):
    return [(o.name.removeprefix("driver rollout | "), o.status) for o in result.nodes[node].ops]


def test_all_good_every_node_upgraded_in_batches(fleet):
    fake = Fleet()
    went, result = fleet(fake)
    assert went and result.ok and fake.running == {n: "2.0" for n in NODES} and not fake.reason
    assert [(r["batch"], r["nodes"]) for r in result.rollouts] == [
        ("canary", ["gpu01"]), ("batch 2", ["gpu02", "gpu03"]), ("batch 3", ["gpu04"])]


def test_a_canary_failing_verification_is_rolled_back_and_nothing_else_touched(fleet):
    fake = Fleet(broken={"2.0"})
    went, result = fleet(fake)
    assert not went
    assert steps(result, "gpu01") == [
        ("drain", "changed"), ("wait for jobs", "changed"), ("install", "changed"), ("reboot", "changed"),
        ("verify", "failed"), ("rollback install", "changed"), ("rollback reboot", "changed"),
        ("rollback verify", "changed"), ("rollback resume", "changed")]
    err = result.nodes["gpu01"].error
    assert err.startswith("driver rollout: verify failed: nvidia-smi failed") and \
        err.endswith("(rolled back to 1.0, verified and resumed)")
    assert fake.running["gpu01"] == "1.0" and "gpu01" not in fake.reason  # in service again
    assert {n for n, _ in fake.log} == {"gpu01"}
    assert [steps(result, n) for n in ("gpu02", "gpu03", "gpu04")] == [[("not started", "skipped")]] * 3


def test_a_failure_in_batch_two_rolls_that_node_back_and_stops(fleet):
    fake = Fleet(broken=set())
    fake.answer_orig = fake.answer

    def answer(node, command):  # gpu03 alone cannot run 2.0
        if node == "gpu03" and command.startswith("nvidia-smi --query-gpu") and fake.running[node] == "2.0":
            return 9, "", "NVIDIA-SMI has failed"
        return fake.answer_orig(node, command)
    fake.answer = answer
    went, result = fleet(fake)
    assert not went
    assert fake.running == {"gpu01": "2.0", "gpu02": "2.0", "gpu03": "1.0", "gpu04": "1.0"}
    assert result.nodes["gpu01"].ok and result.nodes["gpu02"].ok and not result.nodes["gpu03"].ok
    assert "rolled back to 1.0" in result.nodes["gpu03"].error
    assert steps(result, "gpu04") == [("not started", "skipped")] and not any(n == "gpu04" for n, _ in fake.log)
    assert not fake.reason  # every node in service


def test_no_rollback_for_a_first_install_leaves_the_node_drained(fleet):
    fake = Fleet(installed="", broken={"2.0"})
    went, result = fleet(fake)
    assert not went and steps(result, "gpu01")[-2:] == [("verify", "failed"), ("rollback", "skipped")]
    assert "no rollback: no driver package was installed before" in result.nodes["gpu01"].error
    assert fake.reason["gpu01"].startswith("corral: driver 2.0 verify failed")


def test_rollback_off_by_policy(fleet):
    fake = Fleet(broken={"2.0"})
    went, result = fleet(fake, "rollout: {rollback: false, drain_timeout: 60}\n")
    assert "no rollback (rollout.rollback is false)" in result.nodes["gpu01"].error
    assert fake.running["gpu01"] == "2.0" and "gpu01" in fake.reason


def test_a_rollback_that_fails_leaves_the_node_drained_and_says_where(fleet):
    fake = Fleet(broken={"2.0"}, no_install={"gpu01"})
    fake.no_install = set()
    orig = fake.answer

    def answer(node, command):  # the old version cannot be installed again
        if "apt-get install" in command and "Pin: version 1.0" in command:
            return 100, "", "E: Version '1.0-1' for 'nvidia-open-2' was not found"
        return orig(node, command)
    fake.answer = answer
    went, result = fleet(fake)
    assert steps(result, "gpu01")[-1] == ("rollback install", "failed")
    assert "rollback to 1.0 failed at install" in result.nodes["gpu01"].error
    assert result.nodes["gpu01"].error.endswith("left drained)")
    assert fake.reason["gpu01"].startswith("corral: driver 2.0 verify failed")


def test_rollout_only_keeps_the_other_pending_nodes_as_they_are():
    result = RunResult(run_id="r", command="apply", mode="apply", spec_hash="x", started="t",
                       nodes={n: NodeResult(node=n, address="a") for n in NODES})
    assert batches.only(result, "driver rollout", NODES, None) == NODES
    assert batches.only(result, "driver rollout", NODES, {"gpu02", "gpu09"}) == ["gpu02"]
    assert [o.reason for o in result.nodes["gpu01"].ops] == ["not in --rollout-only: this node was not changed"]
    assert result.nodes["gpu02"].ops == [] and result.warnings == [
        "driver rollout: not started on gpu[01,03-04] (not in --rollout-only)"]


def test_apply_rollout_only_reaches_converge_as_node_names(tmp_path, monkeypatch):
    import corral.workflows.converge as C
    from corral.cli.main import main
    path = tmp_path / "cluster.yaml"
    path.write_text(BASE)
    seen = {}

    def fake(cluster, mode, **kw):
        seen.update(kw)
        return RunResult(run_id="r", command="apply", mode=mode, spec_hash="x", started="t")
    monkeypatch.setattr(C, "converge", fake)
    assert main(["apply", "--yes", "--json", "--rollout-only", "gpu[01-02]", "-f", str(path)]) == 0
    assert seen["rollout_only"] == ["gpu01", "gpu02"]
    assert main(["apply", "--yes", "--rollout-only", "gpu09", "-f", str(path)]) == 2


def test_verification_waits_verify_timeout_for_the_gpus_then_fails_naming_it(fleet, monkeypatch):
    """rollout.verify_timeout bounds how long nvidia-smi may take to show the new driver after the reboot."""
    fake = Fleet(broken={"2.0"})
    asked = []
    original = fake.answer

    def answer(node, command):
        if node == "gpu01" and command.startswith("nvidia-smi --query-gpu"):
            asked.append(fleet.clock.monotonic())
        return original(node, command)
    fake.answer = answer
    went, result = fleet(fake, "rollout: {verify_timeout: 10s}\n")
    assert not went and "(10 s after the reboot)" in result.nodes["gpu01"].error
    first_failing = [t for t in asked if t <= asked[0] + 10]
    assert 4 <= len(first_failing) <= 6  # every 2 s within the 10 s, then the verdict (and the rollback's one try)


def test_gpus_showing_the_driver_late_within_verify_timeout_pass(fleet):
    fake = Fleet()
    late = {"left": 3}
    original = fake.answer

    def answer(node, command):
        if node == "gpu01" and command.startswith("nvidia-smi --query-gpu") and late["left"]:
            late["left"] -= 1
            return 9, "", "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver"
        return original(node, command)
    fake.answer = answer
    went, result = fleet(fake, "rollout: {verify_timeout: 30s}\n")
    assert went and result.ok and late["left"] == 0


def test_a_rebooted_node_is_resumed_only_once_slurmctld_hears_from_it(fleet):
    """After the reboot slurmctld marks the node NOT_RESPONDING until its slurmd registers again; resuming it
    before that would hand it jobs it cannot start."""
    fake = Fleet()
    answers = {"left": 3}
    seen = []
    original = fake.controller

    def controller(command):
        rc, out, err = original(command)
        if command.startswith("scontrol show node") and "gpu01" in command and "reboot" in [s for _, s in fake.log]:
            if answers["left"]:
                answers["left"] -= 1
                out = out.replace("State=IDLE", "State=IDLE+NOT_RESPONDING")
            seen.append((out.split("State=")[1].split()[0], "resume" in [s for n, s in fake.log if n == "gpu01"]))
        return rc, out, err
    fake.controller = controller
    went, result = fleet(fake, "rollout: {canary: 1, batch: 1}\n")
    assert went and result.ok
    assert all(not resumed for state, resumed in seen if "NOT_RESPONDING" in state)
    assert sum(1 for s, _ in seen if "NOT_RESPONDING" in s) == 3
    verify = next(o for o in result.nodes["gpu01"].ops if o.name == "driver rollout | verify")
    assert verify.reason.endswith("; slurmd registered")


def test_a_node_whose_slurmd_never_registers_fails_verification_and_is_rolled_back(fleet):
    fake = Fleet()
    original = fake.controller

    def controller(command):
        rc, out, err = original(command)
        if command.startswith("scontrol show node") and "gpu01" in command and fake.running["gpu01"] == "2.0":
            out = out.replace("State=IDLE", "State=IDLE+NOT_RESPONDING")
        return rc, out, err
    fake.controller = controller
    went, result = fleet(fake)
    assert not went
    error = result.nodes["gpu01"].error
    assert "verify failed: slurmd did not register with slurmctld within 90 s (State=IDLE+NOT_RESPONDING+DRAIN)" in error
    assert error.endswith("(rolled back to 1.0, verified and resumed)")


def test_a_resumed_node_that_never_responds_is_said_to_be_resumed_not_drained():
    clock = Clock()

    class Ctl(S.SlurmNode):
        controller = "ctl"

        def sc(self, command, timeout=30):
            if command.startswith("scontrol show node"):
                return subprocess.CompletedProcess(command, 0, "NodeName=gpu01 State=IDLE+NOT_RESPONDING\n", "")
            return subprocess.CompletedProcess(command, 0, "", "")
    ctl = Ctl()
    ctl.clock = clock
    with pytest.raises(S.StepFailed) as err:
        ctl.resume("gpu01")
    assert err.value.step == "resume" and not err.value.keep_drained
    assert str(err.value) == ("gpu01 was resumed in Slurm, but slurmd did not register with slurmctld within 90 s "
                              "(State=IDLE+NOT_RESPONDING): check slurmd on it")
    assert clock.now >= 90
