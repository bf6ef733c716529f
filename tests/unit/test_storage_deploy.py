"""deploy/storage.py: which operations each node gets (prepared, no SSH: preparing runs no command), on a
real and on a virtual cluster; and the mount script run against stand-in systemctl/mountpoint/journalctl:
a new unit that does not mount is removed again, a changed one stays, a mount that was there stays."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from corral.deploy import storage
from tests.unit.deploy_ops import planned_ops

SPEC = """\
name: lab
nodes:
  - names: ctl1
    addresses: [10.213.0.10]
    roles: [controller, nfs]
  - names: login1
    addresses: [10.213.0.20]
    roles: [login]
  - names: gpu[01-02]
    addresses: 10.213.0.[11-12]
    roles: [compute]
storage:
  exports:
    - path: /srv/nfs/home
  mounts:
    - path: /home
      export: /srv/nfs/home
    - path: /lustre
      fstype: lustre
      source: 10.0.0.5@tcp:/lustre
      nodes: gpu01
"""


def op_names(tmp_path: Path, text: str) -> dict[str, list[str]]:
    return planned_ops(tmp_path, text, (storage.storage_server, storage.storage_mounts))


def test_real_cluster_ops_per_node(tmp_path):
    ops = op_names(tmp_path, SPEC)
    stale = "storage mounts | mounts removed from the spec unmounted"  # every real node: units of an old spec
    assert ops["ctl1"] == [
        "storage server | NFS server installed", "storage server | export directory /srv/nfs/home",
        "storage server | /etc/exports.d/corral.exports", "storage server | nfs-server running",
        "storage server | exports re-read (exportfs -ra)", stale]
    home = ["storage mounts | mount point /home", "storage mounts | /etc/systemd/system/home.mount",
            "storage mounts | /home mounted"]
    assert ops["login1"] == ["storage mounts | storage clients installed: nfs-common", *home, stale]
    assert ops["gpu02"] == ["storage mounts | storage clients installed: nfs-common", *home, stale,
                            "storage mounts | slurmd starts after the shared mounts",
                            "storage mounts | systemd reloaded (slurmd drop-in)"]
    assert "storage mounts | /lustre mounted" in ops["gpu01"] and "storage mounts | /lustre mounted" not in ops["gpu02"]


def test_virtual_cluster_checks_and_skips(tmp_path):
    ops = op_names(tmp_path, SPEC + "virtual: {bridge: corral0, subnet: 10.213.0.0/24}\n")
    assert ops["ctl1"] == ["storage server | NFS server"]
    assert ops["login1"] == ["storage mounts | /home (emulated NAS)"]
    assert ops["gpu01"] == ["storage mounts | /home (emulated NAS)", "storage mounts | /lustre (emulated NAS)",
                            "storage mounts | slurmd starts after the shared mounts",
                            "storage mounts | systemd reloaded (slurmd drop-in)"]


def test_paths_and_packages_are_in_the_one_snapshot(tmp_path):
    from corral.deploy.nodestate import _union, Want
    op_names(tmp_path, SPEC)
    union = _union(Want())
    assert {"/etc/systemd/system/home.mount", "/etc/systemd/system/lustre.mount", storage.EXPORTS,
            storage.MOUNTS_DROPIN} <= set(union.paths)
    assert {"nfs-common", "nfs-kernel-server"} <= set(union.packages) and "nfs-server" in union.services


# --- the mount script, against stand-ins -----------------------------------------------------------

def run_script(tmp_path: Path, action: str, new: bool, was_mounted: bool = False, fails: bool = True):
    bin_dir, log = tmp_path / "bin", tmp_path / "log"
    bin_dir.mkdir()
    status = 1 if fails else 0
    (bin_dir / "systemctl").write_text(f"#!/bin/sh\necho \"systemctl $*\" >> {log}\n"
                                       f"case $1 in start|restart) exit {status};; status) echo 'mount error 113';; esac\n")
    (bin_dir / "journalctl").write_text(f"#!/bin/sh\necho \"journalctl $*\" >> {log}\necho 'No route to host'\n")
    (bin_dir / "mountpoint").write_text(f"#!/bin/sh\necho \"mountpoint $*\" >> {log}\nexit {status}\n")
    for f in bin_dir.iterdir():
        f.chmod(0o755)
    unit = tmp_path / "home.mount"
    unit.write_text("[Mount]\n")
    script = storage.mount_script("/home", "home.mount", action, new, was_mounted, unit_dir=str(tmp_path))
    proc = subprocess.run(["bash", "-c", script], env=dict(os.environ, PATH=f"{bin_dir}:{os.environ['PATH']}"),
                          capture_output=True, text=True, timeout=30)
    return proc, log.read_text().splitlines(), unit.exists()


def test_a_new_unit_that_mounts_stays(tmp_path):
    proc, log, kept = run_script(tmp_path, "start", new=True, fails=False)
    assert proc.returncode == 0 and kept
    assert log == ["systemctl daemon-reload", "systemctl enable --quiet home.mount", "systemctl start home.mount",
                   "mountpoint -q /home"]


def test_a_new_unit_that_does_not_mount_is_removed_again(tmp_path):
    proc, log, kept = run_script(tmp_path, "start", new=True)
    assert proc.returncode == 1 and not kept
    assert "mount error 113" in proc.stderr and "No route to host" in proc.stderr
    assert "corral: /home is not mounted (home.mount, systemctl start); its status and log:" in proc.stderr
    assert log[-4:] == ["systemctl disable --quiet home.mount", "systemctl stop home.mount",
                        "systemctl daemon-reload", "systemctl reset-failed home.mount"]


def test_a_new_unit_over_an_existing_mount_never_stops_it(tmp_path):
    proc, log, kept = run_script(tmp_path, "start", new=True, was_mounted=True)
    assert proc.returncode == 1 and not kept and "systemctl stop home.mount" not in log


@pytest.mark.parametrize("action", ["restart", "start"])
def test_a_unit_that_was_there_stays_when_it_fails(tmp_path, action):
    proc, log, kept = run_script(tmp_path, action, new=False)
    assert proc.returncode == 1 and kept
    assert f"systemctl {action} home.mount" in log and "systemctl disable --quiet home.mount" not in log


def test_a_node_that_mounts_nothing_drops_what_an_earlier_spec_left(tmp_path):
    """No storage in the spec: every real node still looks for corral's mount units of an earlier spec,
    and a compute node removes the slurmd ordering drop-in (then reloads systemd if it was there)."""
    bare = SPEC.split("storage:")[0].replace("roles: [controller, nfs]", "roles: [controller]")
    ops = op_names(tmp_path, bare)
    assert ops["ctl1"] == ops["login1"] == ["storage mounts | mounts removed from the spec unmounted"]
    assert ops["gpu01"] == ["storage mounts | mounts removed from the spec unmounted",
                            "storage mounts | slurmd mounts drop-in (the node mounts nothing)",
                            "storage mounts | systemd reloaded (slurmd drop-in removed)"]
