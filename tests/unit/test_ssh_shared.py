"""engine/remote.shared_connections: inside the block each ssh run_on/stream starts shares one
connection per node (ControlMaster, sockets in the block's private directory); outside it, none."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from corral.engine import remote
from corral.spec.loader import load
from corral.virtual.defaults import default_spec


@pytest.fixture
def vcluster_spec(tmp_path):
    (tmp_path / ".corral" / "ssh").mkdir(parents=True)
    (tmp_path / ".corral" / "ssh" / "id_ed25519").write_text("not a key: nothing connects\n")
    (tmp_path / "cluster.yaml").write_text(default_spec())
    return load(tmp_path / "cluster.yaml")


def _options(argv: list[str]) -> dict[str, str]:
    return dict(argv[i + 1].split("=", 1) for i, a in enumerate(argv) if a == "-o")


def test_outside_the_block_each_command_has_its_own_connection(vcluster_spec):
    argv = remote.ssh_argv(vcluster_spec, "ctl", "true")
    assert not {"ControlMaster", "ControlPath", "ControlPersist"} & set(_options(argv))


def test_inside_the_block_commands_share_a_master_in_a_private_directory(vcluster_spec):
    with remote.shared_connections():
        opts = _options(remote.ssh_argv(vcluster_spec, "ctl", "true"))
        directory = Path(opts["ControlPath"]).parent
        assert opts["ControlMaster"] == "auto" and opts["ControlPath"].endswith("/%C")
        assert int(opts["ControlPersist"]) == remote.MUX_IDLE_S  # a master left by a killed corral ends
        assert stat.S_IMODE(os.stat(directory).st_mode) == 0o700
        assert len(str(directory)) + 41 < 104  # %C is 40 hex digits; a socket's path has ~104 bytes
        with remote.shared_connections():  # nested: the same connections
            assert _options(remote.ssh_argv(vcluster_spec, "gpu01", "true"))["ControlPath"] == opts["ControlPath"]
        assert directory.exists()
    assert not directory.exists()
    assert "ControlPath" not in _options(remote.ssh_argv(vcluster_spec, "ctl", "true"))


def test_an_exception_in_the_block_still_removes_the_directory(vcluster_spec):
    seen = []
    try:
        with remote.shared_connections():
            seen.append(Path(_options(remote.ssh_argv(vcluster_spec, "ctl", "true"))["ControlPath"]).parent)
            raise KeyboardInterrupt
    except KeyboardInterrupt:
        pass
    assert seen and not seen[0].exists()
    assert not remote._MUX


def test_a_long_tmpdir_still_gives_a_socket_path_ssh_accepts(vcluster_spec, tmp_path, monkeypatch):
    long_dir = tmp_path / ("t" * 90)
    long_dir.mkdir()
    monkeypatch.setattr(remote.tempfile, "tempdir", str(long_dir))
    with remote.shared_connections():
        path = _options(remote.ssh_argv(vcluster_spec, "ctl", "true"))["ControlPath"].replace("%C", "c" * 40)
        assert len(path) < 108 and path.startswith("/tmp/corral-ssh-")
