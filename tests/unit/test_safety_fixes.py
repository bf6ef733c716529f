"""Safety fixes, each against the failure it guards: the rollouts against a scripted controller and
node (slurmctld down, squeue failing, a refused drain: no install, no reboot, no MIG apply),
validate's job id before sacct, /etc/hosts with broken markers, empty or short secrets."""

from __future__ import annotations

import shlex
import subprocess

import pytest

import corral.workflows.mig_rollout as M
import corral.workflows.driver_rollout as R
from tests.unit.fakes import Clock, seam
from corral.workflows.node_rollout import Env, Rollout
from corral.engine.results import NodeResult, RunResult
from corral.errors import CorralError, NodeError
from corral.spec.loader import load_text

SPEC = """\
name: lab
nodes:
  - {names: ctl, addresses: [10.0.0.10], roles: [controller, accounting]}
  - {names: gpu01, addresses: [10.0.0.11], roles: [compute], gpus: {model: h100, count: 2}}
nvidia: {driver: {version: "550.127.05"}}
rollout: {drain_timeout: 60}
"""
MIG_SPEC = """\
name: lab
nodes:
  - {names: ctl, addresses: [10.0.0.10], roles: [controller]}
  - names: gpu01
    addresses: [10.0.0.11]
    roles: [compute]
    gpus: {model: a100, count: 4, mig: [{gpus: "0", profiles: [3g.40gb, 4g.40gb]}]}
nvidia: {mig_parted: {sha256: skip}}
rollout: {drain_timeout: 60}
"""
DOWN = (1, "", "slurm_load_node error: Unable to contact slurm controller (connect failure)\n")
SQUEUE_DOWN = (1, "", "squeue: error: Unable to contact slurm controller (connect failure)\n")
OURS = "corral: driver 550.127.05 rollout"



class Cluster:
    """run_on for the controller ctl and the node gpu01, scripted; every step of interest logged."""

    def __init__(self, show=None, squeue=(), drain_rc=0):
        self.show = show  # None: scontrol answers from the node's state; else (rc, out, err) or an exception
        self.squeue, self.drain_rc = list(squeue), drain_rc  # squeue: answers in turn, then "no job"
        self.reason: str | None = None  # None: not drained
        self.log: list[str] = []

    def __call__(self, cluster, node, command, *, timeout=120, check=False, input=None):
        rc, out, err = self.answer(node, command)
        if check and rc:
            raise NodeError("command failed", node=node, command=command, rc=rc)
        return subprocess.CompletedProcess(command, rc, out, err)

    def answer(self, node, command):
        if node == "ctl" and command.startswith("scontrol show node"):
            self.log.append("show")
            if isinstance(self.show, Exception):
                raise self.show
            if self.show is not None:
                return self.show
            reason = f" Reason={self.reason} [root@2025-01-01T00:00:00]" if self.reason else ""
            return 0, f"NodeName=gpu01 Arch=x86_64 State=IDLE{'+DRAIN' if self.reason else ''}{reason} Gres=gpu:2\n", ""
        if node == "ctl" and "state=drain" in command:
            self.log.append("drain")
            if self.drain_rc:
                return self.drain_rc, "", "slurm_update error: Unable to contact slurm controller\n"
            self.reason = shlex.split(command)[-1].split("=", 1)[1]
            return 0, "", ""
        if node == "ctl" and "state=resume" in command:
            self.log.append("resume")
            self.reason = None
            return 0, "", ""
        if node == "ctl" and command.startswith("squeue"):
            self.log.append("squeue")
            return self.squeue.pop(0) if self.squeue else (0, "", "")
        assert node == "gpu01", command
        for word, step in (("apt-get install", "install"), ("systemctl reboot", "reboot"),
                           ("nvidia-mig-parted apply", "apply")):
            if word in command:
                self.log.append(step)
                return 0, "", ""
        if command.startswith("nvidia-smi --query-gpu"):
            return 0, "550.127.05\n550.127.05\n", ""
        return 0, "", ""  # the reboot marker gone with slurmd active, persistenced


@pytest.fixture
def rollout():
    clock = Clock()

    def setup(fake: Cluster, spec: str = SPEC, decl=R.DRIVER, **env) -> Rollout:
        return Rollout(decl, load_text(spec, "cluster.yaml"), Env(run=seam(fake), clock=clock, **env))
    return setup


def steps(ops) -> list[tuple[str, str]]:
    return [(o.name.split(" | ")[1], o.status) for o in ops]


# --- driver rollout ----------------------------------------------------------------------------


def test_a_rollout_drains_waits_installs_reboots_verifies_resumes(rollout):
    fake = Cluster(squeue=[(0, "4242\n", "")])
    ops, error = rollout(fake).one("gpu01")
    assert error is None and fake.reason is None
    assert [s for s, _ in steps(ops)] == ["drain", "wait for jobs", "install", "reboot", "verify", "resume"]
    # after the reboot: slurmd registered (show), the drain still corral's (show), resume, responding (show)
    assert fake.log == ["show", "drain", "squeue", "squeue", "install", "reboot", "show", "show", "resume", "show"]


def test_a_node_slurm_says_it_does_not_know_is_installed_without_a_drain(rollout):
    fake = Cluster(show=(1, "Node gpu01 not found\n", ""))
    ops, error = rollout(fake).one("gpu01")
    assert error is None and "drain" not in fake.log and ["install", "reboot"] == fake.log[-2:]


@pytest.mark.parametrize("show", [DOWN, (0, "", ""), (0, "slurm_load_node: garbled\n", ""),
                                  (1, "Node gpu02 not found\n", ""),
                                  NodeError("command timed out after 30 s", node="ctl")],
                         ids=["rc1", "empty", "garbled", "another-node", "ssh-timeout"])
def test_slurmctld_not_answering_stops_the_node_before_anything_changes(rollout, show):
    fake = Cluster(show=show)
    ops, error = rollout(fake).one("gpu01")
    assert fake.log == ["show"]  # no drain, no install, no reboot
    assert steps(ops) == [("ask Slurm", "failed")]
    assert error.startswith("driver rollout: ask Slurm failed: slurmctld on ctl did not answer for gpu01")
    assert error.endswith("(nothing changed)") and "start slurmctld" in error


def test_squeue_failing_once_is_asked_again_not_read_as_no_jobs(rollout):
    fake = Cluster(squeue=[SQUEUE_DOWN, (0, "4242\n", "")])
    _, error = rollout(fake).one("gpu01")
    assert error is None and fake.log[:6] == ["show", "drain", "squeue", "squeue", "squeue", "install"]


def test_squeue_failing_until_the_deadline_fails_the_step_and_keeps_the_drain(rollout):
    fake = Cluster(squeue=[SQUEUE_DOWN] * 1000)
    ops, error = rollout(fake).one("gpu01")
    assert "install" not in fake.log and "reboot" not in fake.log and "resume" not in fake.log
    assert steps(ops) == [("drain", "changed"), ("wait for jobs", "failed")]
    assert "squeue failed until the deadline (60 s; rc=1: squeue: error: Unable to contact" in error
    assert error.endswith("(left drained)") and fake.reason.startswith("corral: driver 550.127.05 wait for jobs failed")


def test_a_refused_drain_fails_the_step_before_the_install(rollout):
    fake = Cluster(drain_rc=1)
    ops, error = rollout(fake).one("gpu01")
    assert "install" not in fake.log and "reboot" not in fake.log and "squeue" not in fake.log
    assert steps(ops) == [("drain", "failed")]
    assert error.startswith("driver rollout: drain failed: slurmctld on ctl did not drain gpu01 (scontrol update: rc=1")


def test_slurmctld_gone_at_the_resume_leaves_the_node_drained_and_says_so(rollout):
    fake = Cluster()
    r = rollout(fake)
    real = fake.answer

    def down_after_reboot(node, command):
        if "reboot" in fake.log and node == "ctl":
            return DOWN
        return real(node, command)
    fake.answer = down_after_reboot
    ops, error = r.one("gpu01")
    assert fake.reason == OURS and steps(ops)[-1] == ("ask Slurm", "failed")
    assert "Slurm not updated: slurmctld on ctl did not drain gpu01" in error and error.endswith("(left drained)")


# --- MIG rollout -------------------------------------------------------------------------------


@pytest.mark.parametrize("fake,step", [(lambda: Cluster(show=DOWN), "ask Slurm"),
                                       (lambda: Cluster(squeue=[SQUEUE_DOWN] * 1000), "wait for jobs"),
                                       (lambda: Cluster(drain_rc=1), "drain")],
                         ids=["scontrol-down", "squeue-down", "drain-refused"])
def test_mig_slurm_not_answering_means_no_apply(rollout, fake, step):
    fake = fake()
    ops, error = rollout(fake, MIG_SPEC, M.MIG).one("gpu01")
    assert "apply" not in fake.log and steps(ops)[-1] == (step, "failed")
    assert error.startswith(f"MIG rollout: {step} failed: ")


def test_mig_resume_with_slurmctld_down_fails_the_node_not_the_rollout(rollout):
    fake = Cluster(show=DOWN)
    result = RunResult(run_id="1", command="apply", mode="apply", spec_hash="x", started="now",
                       nodes={"gpu01": NodeResult(node="gpu01", address="10.0.0.11")})
    follow = RunResult(run_id="2", command="apply", mode="apply", spec_hash="x", started="now",
                       nodes={"gpu01": NodeResult(node="gpu01", address="10.0.0.11")})
    r = rollout(fake, MIG_SPEC, M.MIG, follow=lambda names: follow)
    r.one = lambda name: ([], None)  # the node reconfigured (scripted): the resume after Slurm follows is under test
    M.start(r, result, ["gpu01"])
    node = result.nodes["gpu01"]
    assert node.error.startswith("MIG rollout: Slurm not updated: slurmctld on ctl did not answer for gpu01")
    assert steps(node.ops) == [("resume", "failed")] and "resume" not in fake.log


# --- validate: the job id before sacct ----------------------------------------------------------


@pytest.mark.parametrize("text,ok", [("4242", True), ("4242_3", True), ("4242.0", True), ("", False),
                                     ("4242; rm -rf /", False), ("$(reboot)", False), ("4242\n", False),
                                     ("12a", False), ("-1", False), ("٣", False)])
def test_job_id_is_digits_with_an_array_or_step_suffix(text, ok):
    from corral.checks.validate import job_id
    assert (job_id(text) == text) if ok else job_id(text) is None


def test_a_non_numeric_job_id_is_a_fail_and_never_reaches_sacct(monkeypatch):
    import corral.checks.validate as V
    sent = []
    monkeypatch.setattr(V, "run_on", lambda c, n, cmd, **kw: sent.append(cmd) or
                        subprocess.CompletedProcess(cmd, 0, "4242|COMPLETED|root\n", ""))
    cluster = load_text(SPEC, "cluster.yaml")
    check = V._accounting(cluster, "ctl", "4242; touch /tmp/owned")
    assert check.status == "FAIL" and "not a Slurm job id" in check.message and sent == []
    assert V._accounting(cluster, "ctl", "4242").status == "OK" and sent == [
        "sacct -n -X -P -j 4242 -o JobID,State,Account"]


# --- /etc/hosts markers -------------------------------------------------------------------------

ADMIN = "127.0.0.1\tlocalhost\n10.9.9.9\tnas\n"


def block(*rows: str) -> str:
    from corral.render.hosts import BEGIN, END
    return "\n".join([BEGIN, *rows, END]) + "\n"


@pytest.mark.parametrize("current", [
    ADMIN + block("10.0.0.10\tctl").splitlines()[0] + "\n10.0.0.10\tctl\n10.1.1.1\tbackup\n",     # BEGIN, no END
    ADMIN + block()[block().index("\n") + 1:] + "10.1.1.1\tbackup\n",                             # END, no BEGIN
    ADMIN + block("10.0.0.10\tctl") + block("10.0.0.10\tctl") + "10.1.1.1\tbackup\n",             # two blocks
    block()[block().index("\n") + 1:] + ADMIN + block().splitlines()[0] + "\n",                  # END before BEGIN
], ids=["begin-without-end", "end-without-begin", "two-begins", "end-before-begin"])
def test_broken_markers_are_refused_and_lose_nothing(current):
    from corral.render.hosts import merge_hosts
    with pytest.raises(CorralError, match="markers in /etc/hosts") as err:
        merge_hosts(current, block("10.0.0.10\tctl", "10.0.0.11\tgpu01"))
    assert "the file was left as it is" in str(err.value) and "fix:" in str(err.value)


def test_a_well_formed_block_is_replaced_and_the_admins_lines_kept():
    from corral.render.hosts import merge_hosts
    new = block("10.0.0.10\tctl", "10.0.0.11\tgpu01")
    current = ADMIN + block("10.0.0.99\tctl") + "10.1.1.1\tbackup\n127.0.1.1\tgpu01\n"
    assert merge_hosts(current, new) == ADMIN + "10.1.1.1\tbackup\n" + new
    assert merge_hosts(ADMIN, new) == ADMIN + new


# --- secrets ------------------------------------------------------------------------------------


def test_a_munge_key_is_made_once_and_an_empty_or_short_one_is_refused(tmp_path):
    from corral.secrets import secret_bytes
    key = secret_bytes(tmp_path, "munge.key", 1024)
    assert len(key) == 1024 and secret_bytes(tmp_path, "munge.key", 1024) == key
    path = tmp_path / "secrets" / "munge.key"
    for data, what in [(b"", "is empty"), (b" \n\t\n", "is blank"), (b"k" * 31, "31 bytes long")]:
        path.write_bytes(data)
        with pytest.raises(CorralError, match=what) as err:
            secret_bytes(tmp_path, "munge.key", 1024)
        assert str(path) in str(err.value) and f"remove {path} so corral generates a new one" in str(err.value)
    path.write_bytes(b"k" * 32)
    assert secret_bytes(tmp_path, "munge.key", 1024) == b"k" * 32
    with pytest.raises(ValueError):
        secret_bytes(tmp_path, "tiny.key", 16)


def test_a_blank_password_file_is_refused(tmp_path):
    from corral.secrets import secret_text
    assert len(secret_text(tmp_path, "slurmdbd-db-password", 32)) == 32
    path = tmp_path / "secrets" / "slurmdbd-db-password"
    for data in ("", "  \n"):
        path.write_text(data)
        with pytest.raises(CorralError, match=r"secret file is (empty|blank)") as err:
            secret_text(tmp_path, "slurmdbd-db-password", 32)
        assert str(path) in str(err.value) and "put the real secret back" in str(err.value)
