"""slurm.conf is checked before slurmctld sees it, and a failed restart rolls back: the lint on real
renderings (clean) and on injected lines (each reported), controller_config refusing a bad rendering
before anything is uploaded, and the backup/rollback scripts run with bash against stand-in
systemctl/scontrol."""

from __future__ import annotations

import hashlib
import os
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest
from pyinfra.api import FileUploadCommand, StringCommand

import corral.deploy.slurm as S
from corral.deploy import operations
from corral.deploy.nodestate import Snapshot
from corral.deploy.slurm_guard import apply_or_rollback_script, backup_script
from corral.errors import CorralError
from corral.facts.mig import MigDevice
from corral.render import NodeHW, render_cgroup_conf, render_gres_conf, render_slurm_conf
from corral.render.slurm_lint import lint_cgroup_conf, lint_configs, lint_gres_conf, lint_slurm_conf
from corral.spec.loader import load_text
from corral.virtual.defaults import default_spec

SPECS = Path(__file__).resolve().parents[1] / "fixtures" / "spec"
SMALL = """\
name: lab
nodes:
  - {names: ctl, addresses: [10.0.0.10], roles: [controller, accounting]}
  - {names: "gpu[01-02]", addresses: "10.0.0.[11-12]", roles: [compute], gpus: {model: h100, count: 8}}
  - {names: cpu01, addresses: [10.0.0.13], roles: [compute]}
"""


def _cluster(name: str):
    text = {"small": SMALL, "virtual": default_spec()}.get(name) or (SPECS / name).read_text()
    return load_text(text, "cluster.yaml")


def _rendered(name: str, version=(22, 5), **kw) -> dict[str, str]:
    cluster = _cluster(name)
    hw = {n.name: NodeHW(64, 2, 16, 2, 512000) for n in cluster.with_role("compute")}
    if name == "small":  # one node's GPUs split by MIG: gres.conf MultipleFiles= lines
        hw["gpu01"] = NodeHW(64, 2, 16, 2, 512000, mig=(MigDevice(0, "3g.40gb", 1, 0, 12, 13),))
    return {"slurm.conf": render_slurm_conf(cluster, hw, version=version, **kw),
            "gres.conf": render_gres_conf(cluster, hw, version=version),
            "cgroup.conf": render_cgroup_conf(cluster, version=version)}


@pytest.mark.parametrize("name", ["small", "virtual", "slurm_valid.yaml", "anchors_valid.yaml",
                                  "virtual_valid.yaml", "overrides.yaml"])
@pytest.mark.parametrize("version", [(22, 5), (23, 11)])
def test_real_renderings_lint_clean(name, version):
    assert lint_configs(_rendered(name, version)) == []
    assert lint_configs(_rendered(name, version, without_hooks=["gpu01"])) == []


CLEAN = _rendered("slurm_valid.yaml")["slurm.conf"]


def _inject(after: str, extra: str) -> str:
    assert after in CLEAN
    return CLEAN.replace(after, after + extra, 1)


@pytest.mark.parametrize("bad,expect", [
    # a free-text value carrying a line break: the classic injection, wherever it lands
    (_inject("ClusterName=lab", "\nPrologSlurmctld=/tmp/x.sh"), "PrologSlurmctld= names '/tmp/x.sh'"),
    (_inject("MaxTime=2-00:00:00", "\nPrologSlurmctld=/tmp/x.sh"), "PrologSlurmctld= takes one value"),
    (_inject("ClusterName=lab", "\nProlog=/tmp/x.sh"), "Prolog= again (first on line"),
    (_inject("ClusterName=lab", "\nSlurmUser=root"), "SlurmUser= again (first on line 4)"),
    (_inject("ClusterName=lab", "\nFrobnicate=1"), "unknown key Frobnicate="),
    (_inject("ClusterName=lab", "\nInclude /tmp/evil.conf"), "'Include' is not Key=Value"),
    (_inject("ClusterName=lab", "\ngarbage"), "'garbage' is not Key=Value"),
    (_inject("ClusterName=lab", "#x"), "ClusterName= value 'lab#x' holds #"),
    (_inject("ClusterName=lab", "\\"), "holds \\"),
    (_inject("ClusterName=lab", "\r"), "control character 0x0d"),
    (_inject("ClusterName=lab", " AuthType=auth/none"), "ClusterName= takes one value"),
    (_inject("ClusterName=lab", "\nAuthType="), "AuthType= has no value"),
    (_inject("State=UNKNOWN", " Prolog=/tmp/x.sh"), "Prolog= is not a NodeName= line's key"),
    (_inject("State=UNKNOWN", " State=IDLE"), "State= twice on one line"),
    (_inject("State=UP", "\nPartitionName=gpu Nodes=gpu01"), "PartitionName=gpu again"),
])
def test_injected_lines_are_reported(bad, expect):
    problems = lint_slurm_conf(bad)
    assert any(expect in p for p in problems), problems


def test_gres_and_cgroup_injections_are_reported():
    files = _rendered("small")
    assert lint_gres_conf(files["gres.conf"]) == [] and lint_cgroup_conf(files["cgroup.conf"]) == []
    assert "gres.conf line 4: Prolog= is not a NodeName= line's key" in lint_gres_conf(
        files["gres.conf"].replace("Type=h100", "Type=h100 Prolog=/tmp/x", 1))
    assert any("AutoDetect= again" in p for p in lint_gres_conf(files["gres.conf"] + "AutoDetect=nvml\n"))
    bad = files["cgroup.conf"] + "ConstrainCores=no\nCgroupPlugin=x y\n"
    assert lint_cgroup_conf(bad) == ["cgroup.conf line 8: ConstrainCores= again (first on line 5): a single-valued key",
                                     "cgroup.conf line 9: CgroupPlugin= takes one value, got 2 words: 'CgroupPlugin=x y'",
                                     "cgroup.conf line 9: CgroupPlugin= again (first on line 3): a single-valued key",
                                     "cgroup.conf line 9: 'y' is not Key=Value"]
    assert lint_configs({"/etc/slurm/plugstack.conf": "required /x.so a b\n"}) == []  # not a Key=Value file


# --- controller_config ---------------------------------------------------------------------------------------------


class FakeHost:
    def __init__(self, old_conf: list[str] | None = None) -> None:
        self.noops: list[str] = []
        self.state, self.data, self.old_conf = SimpleNamespace(), {}, old_conf

    def noop(self, message: str) -> None:
        self.noops.append(message)

    def get_fact(self, fact, **kw):
        return self.old_conf if kw.get("path") == S.SLURM_CONF else None


def _file(text: str) -> dict:
    return {"kind": "file", "mode": "644", "user": "root", "group": "root",
            "sha256": hashlib.sha256(text.encode()).hexdigest()}


@pytest.fixture
def op(monkeypatch):
    def setup(snap: Snapshot | None, old_conf=None):
        fake = FakeHost(old_conf)
        monkeypatch.setattr(S, "host", fake)
        monkeypatch.setattr(operations, "host", fake)
        monkeypatch.setattr(operations, "annotate", lambda **kw: None)

        def snapshot(want):
            assert snap is not None, "a refused rendering must not get as far as comparing with the node"
            return snap
        monkeypatch.setattr(S, "snapshot", snapshot)
        return fake
    return setup


def _commands(gen) -> list[str]:
    return [f"upload {c.dest}" if isinstance(c, FileUploadCommand) else
            c.get_raw_value() if isinstance(c, StringCommand) else str(c) for c in gen]


def test_controller_config_refuses_a_bad_rendering_before_uploading_anything(op, monkeypatch):
    op(None)
    cluster = _cluster("slurm_valid.yaml")
    monkeypatch.setattr(S, "render_slurm_conf", lambda *a, **kw: CLEAN.replace(
        "ClusterName=lab", "ClusterName=lab\nPrologSlurmctld=/tmp/x.sh"))
    files = S._configs(cluster)
    with pytest.raises(CorralError, match=r"refusing to install the Slurm configuration: slurm\.conf line 4: "
                                          r"PrologSlurmctld= names '/tmp/x\.sh'"):
        _commands(S.controller_config._inner(files=files, want=S.CTL_WANT))


def test_running_controller_backs_up_installs_then_applies_or_rolls_back(op):
    files = {S.SLURM_CONF: CLEAN, S.CGROUP_CONF: _rendered("slurm_valid.yaml")["cgroup.conf"]}
    old = CLEAN.replace("MaxTime=2-00:00:00", "MaxTime=1-00:00:00")
    op(Snapshot(files={S.SLURM_CONF: _file(old), S.CGROUP_CONF: _file(files[S.CGROUP_CONF])},
                packages={}, services={"slurmctld": ("active", "enabled")}, blocks={}),
       old_conf=old.splitlines())
    cmds = _commands(S.controller_config._inner(files=files, want=S.CTL_WANT))
    assert len(cmds) == 6 and cmds[0].startswith("bash -c ") and "cp -p /etc/slurm/slurm.conf" in cmds[0]
    assert cmds[1:5] == ["mkdir -p /etc/slurm", "install -m 644 -o root -g root /dev/null /etc/slurm/slurm.conf.corral-new",
                         "upload /etc/slurm/slurm.conf.corral-new", "mv -f /etc/slurm/slurm.conf.corral-new /etc/slurm/slurm.conf"]
    assert "scontrol reconfigure" in cmds[5] and "systemctl restart slurmctld" in cmds[5]  # the rollback's restart
    assert "cgroup.conf" not in cmds[5]  # unchanged: neither backed up nor restored


# --- the rollback, run with bash ------------------------------------------------------------------------------------


def _tools(tmp_path: Path) -> dict:
    """systemctl restart fails while slurm.conf holds RESTART-FAILS; slurmctld answers no ping while it holds
    NOT-READY; scontrol reconfigure fails while it holds RECONFIGURE-FAILS. Each call goes to `log`."""
    bin_dir, conf, log = tmp_path / "bin", tmp_path / "slurm.conf", tmp_path / "log"
    bin_dir.mkdir()
    (bin_dir / "systemctl").write_text(f"#!/bin/sh\necho \"systemctl $*\" >> {log}\n"
                                       f"! grep -q RESTART-FAILS {conf}\n")
    (bin_dir / "scontrol").write_text(
        f"#!/bin/sh\necho \"scontrol $*\" >> {log}\ncase $1 in\n"
        f"  ping) grep -q NOT-READY {conf} && exit 1; echo 'Slurmctld(primary) at ctl is UP';;\n"
        f"  reconfigure) ! grep -q RECONFIGURE-FAILS {conf};;\nesac\n")
    for f in bin_dir.iterdir():
        f.chmod(0o755)
    return dict(os.environ, PATH=f"{bin_dir}:{os.environ['PATH']}")


LOGS = "echo 'error: daemon log line'"


def _apply(tmp_path: Path, old: str | None, new: str, restart: bool, gres_before: str | None = None,
           reconfigure: bool = True):
    """slurm.conf (and gres.conf) old -> new as controller_config does it: backup, install, apply."""
    env, conf, gres = _tools(tmp_path), tmp_path / "slurm.conf", tmp_path / "gres.conf"
    paths = [str(conf), str(gres)]
    for path, text in ((conf, old), (gres, gres_before)):
        if text is not None:
            path.write_text(text)
    backup = subprocess.run(["bash", "-c", backup_script(paths)], env=env, capture_output=True, text=True)
    assert backup.returncode == 0, backup.stderr
    conf.write_text(new)
    gres.write_text("AutoDetect=nvml\n")
    ready = operations.readiness("slurmctld", S.CTL_READY, LOGS, timeout_s=1)
    proc = subprocess.run(["bash", "-c", apply_or_rollback_script(paths, restart, ready, LOGS, reconfigure)], env=env,
                          capture_output=True, text=True)
    return proc, (tmp_path / "log").read_text().splitlines(), sorted(p.name for p in tmp_path.glob("*.corral-prev"))


@pytest.mark.parametrize("restart", [True, False])
def test_success_keeps_the_new_files_and_no_copies(tmp_path, restart):
    proc, log, prev = _apply(tmp_path, "old\n", "new\n", restart, gres_before="AutoDetect=off\n")
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "slurm.conf").read_text() == "new\n" and prev == []
    assert log[-1] == "scontrol reconfigure" and ("systemctl restart slurmctld" in log) is restart


@pytest.mark.parametrize("new,restart,failed", [("RESTART-FAILS\n", True, "systemctl restart slurmctld failed"),
                                                ("NOT-READY\n", True, "slurmctld not ready after 1 s"),
                                                ("RECONFIGURE-FAILS\n", True, "scontrol reconfigure failed"),
                                                ("RECONFIGURE-FAILS\n", False, "scontrol reconfigure failed")])
def test_a_failure_restores_the_previous_files_and_restarts_with_them(tmp_path, new, restart, failed):
    proc, log, prev = _apply(tmp_path, "old\n", new, restart, gres_before=None)
    assert proc.returncode == 1
    assert (tmp_path / "slurm.conf").read_text() == "old\n" and prev == []
    assert not (tmp_path / "gres.conf").exists()  # it did not exist before: gone again
    err = proc.stderr.splitlines()
    assert any(line.startswith(failed) for line in err) and "error: daemon log line" in err
    assert err[-1] == (f"previous configuration restored ({tmp_path}/slurm.conf, {tmp_path}/gres.conf) "
                       "and slurmctld restarted with it")
    assert log.count("systemctl restart slurmctld") == (2 if restart else 1)
    assert log[-2:] == ["scontrol ping", "scontrol show partition"]  # ready: answering, and serving
    # systemd may have restarted the failing slurmctld up to its start limit (render/restart.py): cleared first
    assert log[-4:-2] == ["systemctl reset-failed slurmctld", "systemctl restart slurmctld"]


def test_a_standby_backup_is_restarted_and_never_reconfigures(tmp_path):
    """A backup controller's files: restarted, never `scontrol reconfigure` (the primary's op does it once)."""
    proc, log, prev = _apply(tmp_path, "old\n", "new\n", True, reconfigure=False)
    assert proc.returncode == 0 and prev == [] and (tmp_path / "slurm.conf").read_text() == "new\n"
    assert "systemctl restart slurmctld" in log and not any("reconfigure" in line for line in log)
    (tmp_path / "b").mkdir()
    proc, log, prev = _apply(tmp_path / "b", "old\n", "NOT-READY\n", True, reconfigure=False)
    assert proc.returncode == 1 and (tmp_path / "b" / "slurm.conf").read_text() == "old\n"
    assert not any("reconfigure" in line for line in log)
    with pytest.raises(ValueError):
        apply_or_rollback_script(["/x"], False, "true", LOGS, reconfigure=False)


def test_previous_files_that_fail_too_are_said_to(tmp_path):
    proc, log, prev = _apply(tmp_path, "RESTART-FAILS old\n", "RESTART-FAILS new\n", True, gres_before="AutoDetect=off\n")
    assert proc.returncode == 1 and (tmp_path / "slurm.conf").read_text() == "RESTART-FAILS old\n"
    assert (tmp_path / "gres.conf").read_text() == "AutoDetect=off\n" and prev == []
    assert proc.stderr.splitlines()[-1].endswith("slurmctld did not come back with it either")


def test_a_hostile_path_stays_one_word(tmp_path):
    odd = str(tmp_path / "a b;touch PWNED")
    for script in (backup_script([odd]), apply_or_rollback_script([odd], True, "true", LOGS)):
        assert subprocess.run(["bash", "-n", "-c", script]).returncode == 0
    subprocess.run(["bash", "-c", backup_script([odd])], cwd=tmp_path, check=True)
    assert not (tmp_path / "PWNED").exists()
