"""Slurm high availability: a backup controller whose StateSaveLocation is on shared storage. The spec
rule (spec/rules_ha.py) and its warning, slurm.conf (two SlurmctldHost lines, the shared
StateSaveLocation, SlurmctldTimeout), slurmctld's RequiresMountsFor drop-in, the ops each node gets
(the slurm user before any Slurm package, the shared state directory, the drop-in and its removal),
validate's reading of `scontrol ping` with two controllers, and backup/restore's state commands run
against directories here. The uid operation's plan and the facts: tests/operations/slurm_account/,
shared_state_dir/, tests/facts/SlurmAccount/, OwnedDir/."""

from __future__ import annotations

import os
import subprocess
import tarfile
import textwrap
from pathlib import Path

import pytest

import corral.checks.validate as V
from corral.engine import run_context
from corral.backup import state_dir
from corral.checks.slurm_parse import parse_ping, ping_up
from corral.deploy import components
from corral.deploy.slurm import slurm_controller
from corral.deploy.slurm_ha import slurm_user
from corral.errors import SpecError
from corral.render.slurm import render_slurm_conf
from corral.render.storage import state_dropin
from corral.spec.loader import load_text
from corral.spec.rules import spec_warnings
from corral.spec.shared import state_save_location
from tests.unit.validate_capture import Captured
from tests.unit.deploy_ops import planned_ops

NODES = """\
name: ha
nodes:
  - {names: "ctl[1-2]", addresses: "10.0.0.[1-2]", roles: [controller]}
  - {names: gpu01, addresses: [10.0.0.11], roles: [compute], gpus: {model: h100, count: 4}}
"""
NAS = """\
storage:
  mounts:
    - {path: /srv/slurmctld-state, server: nas1, export: /export/slurmstate, roles: [controller]}
slurm:
  state_save_location: /srv/slurmctld-state
  slurmctld_timeout_s: 30
"""
HA = NODES + NAS


def problems(text: str) -> list[str]:
    with pytest.raises(SpecError) as err:
        load_text(text, "cluster.yaml")
    return [str(p) for p in err.value.problems]


# --- the spec rule --------------------------------------------------------------------------------


def test_two_controllers_with_the_state_on_a_nas_mounted_on_both_load():
    cluster = load_text(HA, "cluster.yaml")
    assert state_save_location(cluster) == "/srv/slurmctld-state" and spec_warnings(cluster) == []


def test_two_controllers_with_a_local_state_are_refused_naming_both_and_how():
    (got,) = problems(NODES)
    assert got == ("cluster.yaml:1:1: with two controllers (primary ctl1, backup ctl2) the StateSaveLocation must be "
                   "on shared storage mounted on both (got '/var/lib/slurm/slurmctld'); fix: add a storage.mounts "
                   "entry mounted on the controllers, e.g. {path: /srv/slurmctld-state, server: nas1, export: "
                   "/export/slurmstate, roles: [controller]}, and set slurm.state_save_location: /srv/slurmctld-state")


def test_a_state_on_a_mount_one_controller_lacks_is_located_at_the_key():
    text = HA.replace("roles: [controller]}\nslurm", "nodes: ctl1}\nslurm")
    (got,) = problems(text)
    assert got.startswith("cluster.yaml:9:24: on the shared mount /srv/slurmctld-state, which controller ctl2 does "
                          "not mount")
    assert got.endswith("fix: add controller to storage.mounts[0].roles (or its nodes: hostlist)")


def test_one_controller_the_state_may_be_local_but_not_on_a_mount_it_lacks():
    one = HA.replace('"ctl[1-2]", addresses: "10.0.0.[1-2]"', "ctl1, addresses: [10.0.0.1]")
    assert load_text(one.split("storage:")[0], "cluster.yaml")  # the default, local
    (got,) = problems(one.replace("roles: [controller]}\nslurm", "roles: [compute]}\nslurm"))
    assert "on the shared mount /srv/slurmctld-state, which controller ctl1 does not mount" in got


@pytest.mark.parametrize("path", ["/", "/etc", "/var/lib/slurm", "/var/spool", "/usr/local/x", "/srv"])
def test_a_system_directory_is_refused(path):
    one = NODES.replace('"ctl[1-2]", addresses: "10.0.0.[1-2]"', "ctl1, addresses: [10.0.0.1]")
    (got,) = problems(one + f"slurm:\n  state_save_location: {path}\n")
    assert "cluster.yaml:6:24: slurmctld's StateSaveLocation cannot be a system directory" in got


def test_timeout_is_bounded_and_located():
    (got,) = problems(HA.replace("slurmctld_timeout_s: 30", "slurmctld_timeout_s: 1"))
    assert got.startswith("cluster.yaml:10:24: slurm.slurmctld_timeout_s: must be at least 3 (got 1)")


def test_a_state_served_by_the_nfs_node_that_is_a_controller_is_warned_about():
    text = textwrap.dedent("""\
        name: ha
        nodes:
          - {names: ctl1, addresses: [10.0.0.1], roles: [controller, nfs]}
          - {names: ctl2, addresses: [10.0.0.2], roles: [controller]}
          - {names: gpu01, addresses: [10.0.0.11], roles: [compute]}
        storage:
          exports: [{path: /srv/nfs/state}]
          mounts: [{path: /srv/slurmctld-state, export: /srv/nfs/state, roles: [controller]}]
        slurm:
          state_save_location: /srv/slurmctld-state/ctld
        """)
    assert spec_warnings(load_text(text, "cluster.yaml")) == [
        "slurm.state_save_location /srv/slurmctld-state/ctld: served by ctl1 (the nfs node), which is also a "
        "controller: losing ctl1 loses a controller and the state both; serve it from a NAS "
        "(storage.mounts[].server) or a node that is not a controller"]


# --- rendering ------------------------------------------------------------------------------------


def test_slurm_conf_names_both_controllers_the_shared_state_and_the_timeout():
    conf = render_slurm_conf(load_text(HA, "cluster.yaml"), {}).splitlines()
    keys = ("SlurmctldHost=", "StateSaveLocation=", "SlurmctldTimeout=")
    assert [line for line in conf if line.startswith(keys)] == [
        "SlurmctldHost=ctl1(10.0.0.1)", "SlurmctldHost=ctl2(10.0.0.2)", "StateSaveLocation=/srv/slurmctld-state",
        "SlurmctldTimeout=30"]


def test_default_state_is_local_without_a_timeout_line():
    conf = render_slurm_conf(load_text(NODES.replace('"ctl[1-2]", addresses: "10.0.0.[1-2]"',
                                                     "ctl1, addresses: [10.0.0.1]"), "cluster.yaml"), {})
    assert "StateSaveLocation=/var/lib/slurm/slurmctld\n" in conf and "SlurmctldTimeout" not in conf


def test_the_drop_in_requires_the_state_mount_only_when_there_is_one():
    assert state_dropin(load_text(HA, "cluster.yaml")) == (
        "# Managed by corral\n[Unit]\n# slurmctld's StateSaveLocation is on shared storage: never start without it\n"
        "RequiresMountsFor=/srv/slurmctld-state\n")
    one = NODES.replace('"ctl[1-2]", addresses: "10.0.0.[1-2]"', "ctl1, addresses: [10.0.0.1]")
    assert state_dropin(load_text(one, "cluster.yaml")) is None


# --- the ops each node gets -----------------------------------------------------------------------


def op_names(tmp_path: Path, text: str) -> dict[str, list[str]]:
    def prepare(state):
        ctx = run_context.current()
        ctx.hw, ctx.in_run, ctx.slurm_version = {}, None, (22, 5)
    return planned_ops(tmp_path, text, (slurm_user, slurm_controller), prepare=prepare)


def test_each_controller_gets_the_slurm_user_then_the_shared_state_and_its_drop_in(tmp_path):
    ops = op_names(tmp_path, HA)
    assert ops["ctl1"] == ops["ctl2"]
    assert ops["ctl2"][:6] == [
        "slurm user | slurm user and group with id 64030 (the same on both controllers)",
        "slurm controller | slurmctld installed", "slurm controller | /var/log/slurm",
        "slurm controller | /srv/slurmctld-state (StateSaveLocation on /srv/slurmctld-state)",
        "slurm controller | slurmctld needs the mount of its state (RequiresMountsFor)",
        "slurm controller | systemd reloaded (slurmctld state drop-in)"]
    assert ops["gpu01"] == []


def test_one_controller_keeps_a_local_state_and_drops_an_old_drop_in(tmp_path):
    one = NODES.replace('"ctl[1-2]", addresses: "10.0.0.[1-2]"', "ctl1, addresses: [10.0.0.1]")
    ops = op_names(tmp_path, one)["ctl1"]
    assert ops[:5] == ["slurm controller | slurmctld installed", "slurm controller | /var/log/slurm",
                       "slurm controller | /var/lib/slurm/slurmctld",
                       "slurm controller | slurmctld state drop-in (the state is on the local disk)",
                       "slurm controller | systemd reloaded (slurmctld state drop-in removed)"]


def test_the_slurm_user_comes_before_every_deploy_that_installs_slurm_packages():
    names = [d.deploy_name for d in components(load_text(HA, "cluster.yaml"))]
    assert names.index("slurm user") < min(names.index(n) for n in ("containers", "accounting", "slurm controller"))
    assert names.index("users") < names.index("slurm user")  # after SSSD and local accounts: getent sees them


# --- validate: scontrol ping with two controllers -------------------------------------------------

BOTH_UP = "Slurmctld(primary) at ctl1 is UP\nSlurmctld(backup) at ctl2 is UP\n"
BACKUP_DOWN = ("Slurmctld(primary) at ctl1 is UP\nSlurmctld(backup) at ctl2 is DOWN\n"
               "*****************************************\n** RESTORE SLURMCTLD DAEMON TO SERVICE **\n"
               "*****************************************\n")
PRIMARY_DOWN = BACKUP_DOWN.replace("ctl1 is UP", "ctl1 is DOWN").replace("ctl2 is DOWN", "ctl2 is UP")


def test_ping_parser_reads_every_controller_line():
    assert parse_ping(BACKUP_DOWN) == [("primary", "ctl1", True), ("backup", "ctl2", False)]
    assert parse_ping("Slurmctld(backup2) at c3 is UP\n") == [("backup2", "c3", True)]
    assert ping_up(PRIMARY_DOWN) and not ping_up(PRIMARY_DOWN.replace("ctl2 is UP", "ctl2 is DOWN"))


def _controller_checks(out: str, **nodes) -> tuple[list[tuple[str, str, str]], str | None, Captured]:
    cluster = load_text(HA, "cluster.yaml")
    report = V.Report()
    run = Captured(nodes=nodes, **{"scontrol ping; scontrol version": (0, out + "slurm 22.05.8\n", "")})
    answered = V._controller(cluster, run, report)
    return [(c.name, c.status, c.message) for c in report.checks], answered, run


def test_both_up_is_ok_and_names_the_primary():
    checks, answered, _ = _controller_checks(BOTH_UP)
    assert answered == "ctl1" and checks == [
        ("controller reachable", "OK", "slurmctld on ctl1 (primary) answers (Slurm 22.05.8)"),
        ("backup controller", "OK", "slurmctld on ctl2 (backup) is UP, standing by")]


def test_a_backup_down_is_a_warning_not_a_failure():
    checks, _, _ = _controller_checks(BACKUP_DOWN)
    assert checks[1] == ("backup controller", "WARN", "slurmctld on ctl2 (backup) is DOWN: no failover when ctl1 "
                                                      "fails (systemctl status slurmctld on ctl2)")
    assert checks[0][1] == "OK"


def test_the_backup_answering_alone_is_a_warning_naming_it():
    checks, answered, _ = _controller_checks(PRIMARY_DOWN)
    assert answered == "ctl1" and checks[0] == (
        "controller reachable", "WARN",
        "slurmctld on ctl2 (backup) answers (Slurm 22.05.8); the primary ctl1 is DOWN: the backup has taken over")


def test_an_unreachable_primary_node_is_asked_through_the_backup_node():
    from corral.errors import NodeError
    gone = NodeError("ssh: connect to host 10.0.0.1 port 22: No route to host", node="ctl1")
    checks, answered, run = _controller_checks(PRIMARY_DOWN, ctl1={"scontrol ping; scontrol version": gone})
    assert answered == "ctl2" and [n for n, _, _ in run.calls] == ["ctl1", "ctl2"]
    assert checks[0][1] == "WARN"


def test_none_up_fails_and_no_backup_check_is_made():
    checks, answered, _ = _controller_checks(BOTH_UP.replace("UP", "DOWN"))
    assert answered is None and [c[:2] for c in checks] == [("controller reachable", "FAIL")]
    assert checks[0][2].startswith("slurmctld on ctl1, ctl2 not reachable: Slurmctld(primary) at ctl1 is DOWN")


# --- backup and restore of a state directory anywhere ---------------------------------------------


def sh(command: str, stdin: bytes | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-c", command], input=stdin, capture_output=True, check=True)


def test_a_backup_restores_into_another_location_and_a_failed_restore_puts_back_what_was_there(tmp_path):
    old = tmp_path / "var" / "slurmctld"
    old.mkdir(parents=True)
    (old / "job_state").write_text("queue of the backup\n")
    (old / "hash.1").mkdir()
    packed = sh(state_dir.pack_command(str(old), as_slurm="")).stdout
    assert tarfile.open(fileobj=__import__("io").BytesIO(packed)).getnames()[0] == "slurmctld"

    shared = tmp_path / "srv" / "state"  # a mount point: it stays, only its contents move
    shared.mkdir(parents=True)
    (shared / "job_state").write_text("empty queue of the rebuilt controller\n")
    kept, keep_dir = tmp_path / "keep" / "slurmctld-1", tmp_path / "keep"
    sh(state_dir.keep_command(str(shared), str(kept), str(keep_dir), as_slurm=""))
    assert list(shared.iterdir()) == [] and (kept / "job_state").read_text().startswith("empty")
    sh(state_dir.unpack_command(str(shared), as_slurm=""), stdin=packed)
    assert (shared / "job_state").read_text() == "queue of the backup\n" and (shared / "hash.1").is_dir()

    sh(state_dir.put_back_command(str(shared), str(kept), as_slurm=""))  # the undo step
    assert sorted(p.name for p in shared.iterdir()) == ["job_state"]
    assert (shared / "job_state").read_text().startswith("empty")


@pytest.mark.skipif(os.geteuid() != 0, reason="runs the commands as nobody (needs root)")
def test_state_commands_work_as_an_unprivileged_user_started_in_roots_home(tmp_path):
    """As on a node: the SSH command starts in root's home (0700), the files are slurm's (here nobody's):
    every command still works (a `find` as slurm there failed: "Failed to restore initial working directory")."""
    import pwd
    import shutil
    import tempfile
    nobody = pwd.getpwnam("nobody")
    base = Path(tempfile.mkdtemp(prefix="corral-state-", dir="/tmp"))
    try:
        os.chmod(base, 0o755)
        home = base / "root-home"
        home.mkdir(mode=0o700)
        state = base / "state"
        state.mkdir()
        (state / "job_state").write_text("queue\n")
        for p in (state, state / "job_state"):
            os.chown(p, nobody.pw_uid, nobody.pw_gid)
        as_nobody = "runuser -u nobody --"
        run = lambda c, stdin=None: subprocess.run(["bash", "-c", c], input=stdin, capture_output=True,  # noqa: E731
                                                   check=True, cwd=home)
        packed = run(state_dir.pack_command(str(state), as_slurm=as_nobody)).stdout
        run(state_dir.keep_command(str(state), str(base / "keep" / "k1"), str(base / "keep"), as_slurm=as_nobody))
        assert list(state.iterdir()) == []
        run(state_dir.unpack_command(str(state), as_slurm=as_nobody), stdin=packed)
        assert (state / "job_state").read_text() == "queue\n" and (state / "job_state").stat().st_uid == nobody.pw_uid
        run(state_dir.put_back_command(str(state), str(base / "keep" / "k1"), as_slurm=as_nobody))
        assert (state / "job_state").read_text() == "queue\n"
    finally:
        shutil.rmtree(base)


def test_state_commands_quote_the_path_and_read_as_slurm():
    cluster = load_text(HA, "cluster.yaml")
    from corral.backup.take import state_command
    assert state_command(cluster) == ("cd / && runuser -u slurm -- tar -C /srv --warning=no-file-changed "
                                      "--warning=no-file-removed -czf - slurmctld-state; rc=$?; [ $rc -le 1 ]")
    assert state_dir.unpack_command("/srv/a b") == "cd / && runuser -u slurm -- tar -C '/srv/a b' --strip-components=1 -xzf -"
    assert state_dir.ready_command("/srv/x") == "test -d /srv/x && id slurm >/dev/null"
