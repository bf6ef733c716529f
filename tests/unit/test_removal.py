"""Taking a node out of the spec (workflows/removal.py, removal_phase.py) against a scripted controller
and nodes: the `run(node, command, timeout)` seam answers as scontrol/squeue/scancel and the node's
stop script would; nothing waits (the clock moves when slept on)."""

from __future__ import annotations

import json
import shlex
import subprocess

import pytest

import corral.workflows.slurm_node as S
from tests.unit.fakes import Clock
from corral.engine import node_record
from corral.engine.node_record import DRAINED, SERVICES_LEFT, Deployed
from corral.engine.results import NodeResult, OpResult, RunResult
from corral.errors import NodeError
from corral.spec.loader import load
from corral.workflows import removal_phase
from corral.workflows.removal import DISRUPTION, REASON, STOP_ONLY, Removal, stop_script, units_of

SPEC = """\
name: lab
nodes:
  - {names: ctl, addresses: [10.0.0.10], roles: [controller, accounting]}
  - {names: "gpu[01-02]", addresses: "10.0.0.[11-12]", roles: [compute], gpus: {model: h100, count: 2}}
rollout: {drain_timeout: 60}
"""
GPU03 = Deployed("gpu03", "10.0.0.13", ("compute",), 22, "root")
NOT_FOUND = (1, "", "Node gpu03 not found\n")



class Fake:
    """The controller ctl (Slurm's view of gpu03: known, its reason, its jobs) and the node gpu03."""

    def __init__(self, known=True, jobs=(), stop=(0, "stopped: slurmd munge\n", ""), show=None, squeue=None):
        self.known, self.reason = known, None
        self.jobs = list(jobs)              # squeue's answers in turn ("" = no job), then the last one again
        self.stop, self.show, self.squeue = stop, show, squeue
        self.log: list[str] = []
        self.in_conf = known                # slurm.conf still has it (the components' run removes it)

    def __call__(self, node, command, timeout):
        rc, out, err = self.answer(node, command)
        return subprocess.CompletedProcess(command, rc, out, err)

    def answer(self, node, command):
        if node == "gpu03":
            assert "systemctl disable --now" in command, command
            self.log.append("stop")
            if isinstance(self.stop, Exception):
                raise self.stop
            return self.stop
        assert node == "ctl", (node, command)
        word = shlex.split(command)
        if word[:2] == ["scontrol", "show"]:
            self.log.append("show")
            if self.show is not None:
                return self.show
            if not self.in_conf:
                return NOT_FOUND
            reason = f" Reason={self.reason} [root@2026-01-01T00:00:00]" if self.reason else ""
            return 0, f"NodeName=gpu03 Arch=x86_64 State=IDLE{reason} Gres=gpu:2\n", ""
        if word[:2] == ["scontrol", "update"]:
            state = next(w for w in word if w.startswith("state="))
            self.log.append(state.split("=")[1])
            self.reason = next(w for w in word if w.startswith("reason=")).split("=", 1)[1] \
                if state == "state=drain" else None
            return 0, "", ""
        if word[0] == "scancel":
            self.log.append(" ".join(word))
            self.jobs = [""]
            return 0, "", ""
        if word[0] == "squeue":
            self.log.append("squeue")
            if self.squeue is not None:
                return self.squeue
            answer = self.jobs.pop(0) if len(self.jobs) > 1 else (self.jobs[0] if self.jobs else "")
            return 0, answer, ""
        raise AssertionError(command)


@pytest.fixture
def cluster(tmp_path, monkeypatch):
    monkeypatch.setattr(S.SlurmNode, "clock", Clock())  # Removal (workflows/removal.py) takes no clock of its own
    path = tmp_path / "cluster.yaml"
    path.write_text(SPEC)
    return load(path)


def removal(cluster, fake, force=False, said=None):
    return Removal(cluster, [GPU03], run=fake, force=force, say=(said.append if said is not None else None))


def steps(ops):
    return [(o.name.removeprefix("remove node | "), o.status) for o in ops]


# --- one node ---------------------------------------------------------------------------------------


def test_drain_then_wait_until_its_jobs_end(cluster):
    fake, said = Fake(jobs=["41\n42\n", "42\n", ""]), []
    ops, error, known = removal(cluster, fake, said=said).before("gpu03")
    assert (error, known) == (None, True) and fake.reason == REASON
    assert fake.log == ["show", "drain", "squeue", "squeue", "squeue"]
    assert steps(ops) == [("drain", "changed"), ("wait for jobs", "changed")]
    assert said[0] == f"node gpu03: remove: drain: drained in Slurm ({REASON})"


def test_force_cancels_the_nodes_jobs_instead_of_waiting_for_them(cluster):
    fake = Fake(jobs=["41\n"])
    ops, error, _ = removal(cluster, fake, force=True).before("gpu03")
    assert error is None
    assert fake.log == ["show", "drain", "scancel -w gpu03", "squeue"]
    assert steps(ops) == [("drain", "changed"), ("cancel jobs", "changed"), ("wait for jobs", "changed")]


def test_jobs_still_running_at_the_drain_timeout_fail_it_and_the_node_stays_drained(cluster):
    fake = Fake(jobs=["41\n"])
    ops, error, known = removal(cluster, fake).before("gpu03")
    assert known and fake.reason == REASON and "resume" not in fake.log  # never resumed: it is leaving
    assert steps(ops)[-1] == ("wait for jobs", "failed")
    assert "1 job(s) still running after 60 s (41)" in error and "--force" in error
    assert "stays drained and in slurm.conf" in error


def test_squeue_failing_until_the_deadline_is_never_no_jobs(cluster):
    fake = Fake(squeue=(1, "", "squeue: error: Unable to contact slurm controller\n"))
    _, error, _ = removal(cluster, fake).before("gpu03")
    assert "squeue failed until the deadline" in error and "whether jobs run there is unknown" in error


def test_a_node_slurm_does_not_know_is_not_drained(cluster):
    fake = Fake(known=False)
    ops, error, known = removal(cluster, fake).before("gpu03")
    assert (ops, error, known) == ([], None, False) and fake.log == ["show"]


def test_slurmctld_not_answering_stops_the_removal_before_anything(cluster):
    fake = Fake(show=(1, "", "slurm_load_node error: Unable to contact slurm controller\n"))
    ops, error, known = removal(cluster, fake).before("gpu03")
    assert not known and fake.log == ["show"] and "did not answer for gpu03" in error


def test_after_the_components_it_is_out_of_slurm_then_its_services_stop(cluster):
    fake = Fake()
    fake.in_conf = False  # the controller's run wrote slurm.conf without it
    ops, error, pending = removal(cluster, fake).after("gpu03", True)
    assert (error, pending) == (None, None) and fake.log == ["show", "stop"]
    assert steps(ops) == [("out of Slurm", "changed"), ("stop services", "changed")]
    assert ops[-1].reason.startswith("stopped and disabled: slurmd, munge;")


def test_still_in_slurm_after_the_components_stops_nothing_on_the_node(cluster):
    fake = Fake()  # the controller's run failed: slurm.conf still has it
    ops, error, pending = removal(cluster, fake).after("gpu03", True)
    assert pending == DRAINED and "stop" not in fake.log
    assert "Slurm still knows gpu03 after the apply" in error


@pytest.mark.parametrize("stop", [(255, "", "ssh: connect to host 10.0.0.13 port 22: No route to host\n"),
                                  NodeError("command timed out after 120 s", node="gpu03")])
def test_an_unreachable_node_is_out_of_slurm_and_left_for_a_later_apply(cluster, stop):
    fake = Fake(stop=stop)
    fake.in_conf = False
    ops, error, pending = removal(cluster, fake).after("gpu03", True)
    assert steps(ops) == [("out of Slurm", "changed"), ("stop services", "failed")]
    assert pending == SERVICES_LEFT and error.startswith(f"gpu03: removal: stop services failed: {SERVICES_LEFT}: ")
    assert ("No route to host" in error) if isinstance(stop, tuple) else ("timed out" in error)
    assert "corral trust --forget gpu03" in error


def test_plan_shows_the_running_jobs_and_changes_nothing(cluster):
    fake = Fake(jobs=["41\n42\n"])
    planned = removal(cluster, fake).planned("gpu03")
    assert (planned.name, planned.status, planned.disruption) == ("remove node", "changed", DISRUPTION)
    assert planned.reason.startswith("2 running job(s): apply drains it, waits up to 60 s for its jobs")
    assert fake.log == ["show", "squeue"] and fake.reason is None
    assert removal(cluster, Fake(known=False)).planned("gpu03").disruption == STOP_ONLY
    down = Fake(show=(1, "", "Unable to contact slurm controller\n"))
    assert removal(cluster, down).planned("gpu03").reason.startswith("running jobs unknown")


def test_units_by_role_slurmd_before_munge():
    # each role's own daemons in the reverse of their start order, then those of every node
    assert units_of(("compute",)) == ["corral-dcgm-exporter", "nvidia-dcgm", "slurmd", "corral-mig",
                                      "prometheus-node-exporter", "munge"]
    assert units_of(("login",)) == ["corral-jupyterhub", "prometheus-node-exporter", "munge"]
    assert units_of(("controller", "accounting")) == ["corral-slurm-exporter", "slurmrestd", "slurmctld", "slurmdbd",
                                                      "prometheus-node-exporter", "munge"]


SYSTEMCTL = """#!/bin/sh
# a systemctl for the stop script: units are files in $UNITS (content: active|stuck|inactive)
echo "$*" >> "$UNITS/log"
case "$1" in
cat) [ -e "$UNITS/${3%.service}" ];;
disable) s=$(cat "$UNITS/${4%.service}"); [ "$s" = stuck ] || echo inactive > "$UNITS/${4%.service}";;
is-active) [ "$(cat "$UNITS/${4%.service}")" != inactive ];;
esac
"""


def test_the_stop_script_stops_what_is_there_and_names_what_still_runs(tmp_path):
    units = tmp_path / "units"
    units.mkdir()
    (tmp_path / "systemctl").write_text(SYSTEMCTL)
    (tmp_path / "systemctl").chmod(0o755)
    (units / "slurmd").write_text("active")
    (units / "munge").write_text("active")
    env = {"PATH": f"{tmp_path}:/usr/bin:/bin", "UNITS": str(units)}
    script = stop_script(["slurmd", "corral-mig", "munge"])
    p = subprocess.run(["bash", "-c", script], capture_output=True, text=True, env=env)
    assert (p.returncode, p.stdout) == (0, "stopped: slurmd munge\n")
    assert "disable --now -- slurmd.service" in (units / "log").read_text()
    (units / "slurmd").write_text("stuck")
    p = subprocess.run(["bash", "-c", script], capture_output=True, text=True, env=env)
    assert p.returncode == 1 and p.stderr == "still active: slurmd\n"


# --- around the components' run ------------------------------------------------------------------------


class Components:
    """The engine's run of every component: records that it ran, and what Slurm saw at that moment."""

    def __init__(self, cluster, fake: Fake, controller_ok: bool = True, mode: str = "apply"):
        self.cluster, self.fake, self.ok, self.mode, self.calls = cluster, fake, controller_ok, mode, []

    def __call__(self) -> RunResult:
        self.calls.append(list(self.fake.log))
        if self.ok and self.mode == "apply":  # slurm.conf written without it
            self.fake.in_conf = False
        result = RunResult(run_id="r1", command="apply", mode="apply", spec_hash="x", started="t")
        for n in self.cluster.nodes:
            result.nodes[n.name] = NodeResult(n.name, n.address, ops=[OpResult("base | x", "unchanged")])
        if not self.ok:
            result.nodes["ctl"].error = "ctl: op 'slurm controller | slurm.conf' failed"
        return result


def recorded(cluster, *extra: Deployed) -> None:
    entries = {n.name: node_record.entry(cluster, n) for n in cluster.nodes} | {d.name: d for d in extra}
    node_record.write(cluster.state_dir, entries)


def around(cluster, fake, components, mode="apply", **kw):
    return removal_phase.around(cluster, mode, components, run=fake, **kw)


def test_plan_adds_a_remove_node_op_and_writes_nothing(cluster):
    recorded(cluster, GPU03)
    before = node_record.record_path(cluster.state_dir).read_text()
    fake = Fake(jobs=["41\n"])
    result = around(cluster, fake, Components(cluster, fake, mode="plan"), mode="plan")
    node = result.to_json()["nodes"]["gpu03"]
    assert node["address"] == "10.0.0.13" and node["ok"]
    assert [(o["name"], o["disruption"]) for o in node["ops"]] == [("remove node", DISRUPTION)]
    assert node["ops"][0]["reason"].startswith("1 running job(s)")
    assert fake.reason is None and node_record.record_path(cluster.state_dir).read_text() == before


def test_apply_drains_before_the_components_and_stops_after_then_forgets_the_node(cluster):
    recorded(cluster, GPU03)
    fake = Fake(jobs=["41\n", ""])
    components = Components(cluster, fake)
    result = around(cluster, fake, components)
    assert components.calls == [["show", "drain", "squeue", "squeue"]]  # drained and waited for, first
    assert fake.log[4:] == ["show", "stop"]
    assert result.ok and [o.name for o in result.nodes["gpu03"].ops] == [
        "remove node | drain", "remove node | wait for jobs", "remove node | out of Slurm",
        "remove node | stop services"]
    assert sorted(node_record.read(cluster.state_dir)) == ["ctl", "gpu01", "gpu02"]


def test_jobs_that_do_not_end_stop_the_apply_before_any_component(cluster):
    recorded(cluster, GPU03)
    fake = Fake(jobs=["41\n"])
    components = Components(cluster, fake)
    result = around(cluster, fake, components)
    assert components.calls == [] and not result.ok and list(result.nodes) == ["gpu03"]
    assert "nothing else was applied" in result.warnings[0]
    assert node_record.read(cluster.state_dir)["gpu03"].pending == DRAINED


def test_a_failed_controller_run_keeps_the_node_drained_in_the_record(cluster):
    recorded(cluster, GPU03)
    fake = Fake()
    result = around(cluster, fake, Components(cluster, fake, controller_ok=False))
    assert "stop" not in fake.log and "Slurm still knows gpu03" in result.nodes["gpu03"].error
    assert node_record.read(cluster.state_dir)["gpu03"].pending == DRAINED


def test_an_unreachable_node_is_finished_by_a_later_apply(cluster):
    recorded(cluster, GPU03)
    fake = Fake(stop=(255, "", "ssh: connect to host 10.0.0.13 port 22: Connection timed out\n"))
    result = around(cluster, fake, Components(cluster, fake))
    assert not result.ok and "stop services failed" in result.nodes["gpu03"].error
    assert node_record.read(cluster.state_dir)["gpu03"].pending == SERVICES_LEFT
    fake.stop, fake.log = (0, "stopped: slurmd\n", ""), []  # back: Slurm no longer knows it, no drain
    result = around(cluster, fake, Components(cluster, fake))
    assert result.ok and fake.log == ["show", "stop"]
    assert "gpu03" not in node_record.read(cluster.state_dir)


def test_with_limit_a_removed_node_is_only_named(cluster):
    recorded(cluster, GPU03)
    fake = Fake()
    result = around(cluster, fake, Components(cluster, fake), limit=["gpu01"])
    assert fake.log == [] and "gpu03" not in result.nodes
    assert result.warnings[0].startswith("gpu03: no longer in the spec; an apply without --limit removes them")
    assert node_record.read(cluster.state_dir)["gpu03"] == GPU03


def test_a_node_put_back_after_an_unfinished_removal_is_resumed(cluster):
    recorded(cluster, Deployed("gpu02", "10.0.0.12", ("compute",), 22, "root", DRAINED))
    fake = Fake()
    fake.reason = REASON

    def show(node, command, timeout):  # Slurm's view of gpu02 (still in slurm.conf, drained by us)
        if command.startswith("scontrol show"):
            reason = f" Reason={fake.reason} [root@2026]" if fake.reason else ""
            return subprocess.CompletedProcess(command, 0, f"NodeName=gpu02 State=IDLE{reason}\n", "")
        return fake(node, command, timeout)
    result = removal_phase.around(cluster, "apply", Components(cluster, fake), run=show)
    assert fake.reason is None and [o.name for o in result.nodes["gpu02"].ops][-1] == "back in the spec | resume"
    assert node_record.read(cluster.state_dir)["gpu02"].pending is None


def test_apply_records_the_nodes_it_reached_only(cluster):
    fake = Fake()
    components = Components(cluster, fake)

    def unreachable_gpu02() -> RunResult:
        result = components()
        result.nodes["gpu02"].reachable = False
        return result
    around(cluster, fake, unreachable_gpu02)
    record = json.loads(node_record.record_path(cluster.state_dir).read_text())
    assert record == {"version": 1, "nodes": {
        "ctl": {"address": "10.0.0.10", "roles": ["controller", "accounting"], "ssh_port": 22, "ssh_user": "root"},
        "gpu01": {"address": "10.0.0.11", "roles": ["compute"], "ssh_port": 22, "ssh_user": "root"}}}
    assert oct(node_record.record_path(cluster.state_dir).stat().st_mode)[-3:] == "600"


def test_plan_text_shows_the_removal_and_its_jobs(cluster, capsys):
    from corral.cli.run_cmd import show_plan
    recorded(cluster, GPU03)
    fake = Fake(jobs=["41\n"])
    show_plan(around(cluster, fake, Components(cluster, fake, mode="plan"), mode="plan"))
    out = capsys.readouterr().out.splitlines()
    i = out.index("gpu03: 1 change(s)")
    assert out[i + 1] == f"  ~ remove node  [{DISRUPTION}]"
    assert out[i + 2].startswith("      1 running job(s): apply drains it, waits up to 60 s for its jobs")


def test_the_cli_carries_the_removal_and_force_through_converge(cluster, monkeypatch, capsys):
    """`corral plan --json` and `corral apply --yes --force` through converge (the engine's run faked)."""
    import corral.workflows.converge as C
    import corral.workflows.removal as RM
    from corral.cli.main import main
    recorded(cluster, GPU03)
    fake = Fake(jobs=["41\n"])
    monkeypatch.setattr(RM, "ssh_run", lambda cluster, gone: fake)
    monkeypatch.setattr(C, "run", lambda cluster, deploys, mode, **kw: Components(cluster, fake, mode=mode)())
    assert main(["plan", "--json", "-f", str(cluster.path)]) == 0
    ops = json.loads(capsys.readouterr().out)["nodes"]["gpu03"]["ops"]
    assert [(o["name"], o["disruption"]) for o in ops] == [("remove node", DISRUPTION)]
    assert fake.log == ["show", "squeue"]
    fake.log = []
    assert main(["apply", "--yes", "--force", "--json", "-f", str(cluster.path)]) == 0
    assert fake.log == ["show", "drain", "scancel -w gpu03", "squeue", "show", "stop"]
    assert json.loads(capsys.readouterr().out)["nodes"]["gpu03"]["ok"]
    assert "gpu03" not in node_record.read(cluster.state_dir)


@pytest.mark.parametrize("policy, seconds", [("rollout: {drain_timeout: 2m}\n", 120),
                                             ("nvidia: {rollout: {drain_timeout_s: 30}}\n", 30), ("", 3600)])
def test_the_drain_timeout_is_the_rollout_policys(tmp_path, policy, seconds):
    from corral.workflows.removal import drain_timeout_s
    path = tmp_path / "cluster.yaml"
    path.write_text(SPEC.replace("rollout: {drain_timeout: 60}\n", "") + policy)
    assert drain_timeout_s(load(path)) == seconds
