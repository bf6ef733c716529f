"""Fixtures for end-to-end tests on a real virtual cluster (root, systemd-nspawn)."""

from __future__ import annotations

import ipaddress
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from corral.spec.loader import load
from corral.virtual.defaults import default_spec

# a subnet, bridge and port of the tests' own, so a user's running virtual cluster is never touched
TEST_SUBNET = ipaddress.IPv4Network("10.213.77.0/24")
TEST_BRIDGE = "corraltest0"
TEST_PORT = 18080


def vcluster_unavailable() -> str | None:
    if os.geteuid() != 0:
        return "needs root"
    for tool in ("systemd-nspawn", "debootstrap", "dpkg-scanpackages"):
        if shutil.which(tool) is None:
            return f"needs {tool} (run scripts/bootstrap.sh test)"
    return None


def make_spec(directory: Path, *, name: str = "ctest", compute: int = 2, gpus: int = 4,
              usable: bool = False) -> Path:
    """The default virtual spec on the tests' subnet; `usable`: with the login node, shared /home and
    alice (her key generated as `corral up` does); without, the 3 nodes most modules need."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "cluster.yaml"
    key = None
    if usable:
        from corral.virtual.keys import ensure_key, user_key_file
        key = ensure_key(user_key_file(directory / ".corral", "alice"), f"alice@{name}")
    path.write_text(default_spec(name, compute, gpus, "h100", TEST_SUBNET, TEST_BRIDGE, TEST_PORT,
                                 usable=usable, user_key=key))
    return path


def ssh(vc, node: str, command: str, check: bool = True) -> subprocess.CompletedProcess:
    n = vc.node(node).node
    proc = subprocess.run(vc.ssh_cmd(n.address, command), capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, timeout=60)
    if check and proc.returncode != 0:
        raise AssertionError(f"{node}: {command!r} rc={proc.returncode}: {proc.stderr}")
    return proc


@pytest.fixture(scope="module")
def vcluster(tmp_path_factory):
    """A fresh 3-node virtual cluster (1 controller + 2 compute x 4 emulated H100) for one module."""
    reason = vcluster_unavailable()
    if reason:
        pytest.skip(reason)
    from corral.virtual.cluster import VirtualCluster
    vc = VirtualCluster(load(make_spec(tmp_path_factory.mktemp("vc"))))
    try:
        vc.up()
        yield vc
    finally:
        vc.down()
