"""`corral virtual`: real nspawn nodes on a bridge; up is idempotent; down leaves nothing behind."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from corral.cli.main import main
from corral.spec.loader import load
from corral.virtual import node as vnode
from tests.vcluster.conftest import TEST_BRIDGE, make_spec, ssh, vcluster_unavailable

pytestmark = pytest.mark.vcluster


def leftovers(vc, pids: list[int]) -> list[str]:
    found = []
    with open("/proc/self/mountinfo") as f:
        found += [f"mount {line.split()[4]}" for line in f if str(vc.workdir) in line.split()[4]]
    if Path(f"/sys/class/net/{TEST_BRIDGE}").exists():
        found.append(f"bridge {TEST_BRIDGE}")
    found += [f"cgroup {h}" for h in vnode.CG_HIER if (vnode.CG_ROOT / h / vc.cg_prefix).exists()]
    found += [f"process {p}" for p in pids if vnode.pid_alive(p)]
    return found


def test_virtual_up_ssh_gpus_idempotent_down(tmp_path, capsys):
    reason = vcluster_unavailable()
    if reason:
        pytest.skip(reason)
    from corral.virtual.cluster import VirtualCluster
    spec = make_spec(tmp_path)
    vc = VirtualCluster(load(spec))
    pids: list[int] = []
    try:
        rows = vc.up()
        assert [r.name for r in rows] == ["ctl", "gpu01", "gpu02"]
        assert all(r.running and r.ssh for r in rows)
        pids = [r.pid for r in rows] + [vc.load_state()["repo_pid"]]
        for r in rows:  # a root login with the pinned host key (StrictHostKeyChecking=yes)
            assert ssh(vc, r.name, "hostname").stdout.strip() == r.name
        listing = ssh(vc, "gpu01", "nvidia-smi -L").stdout.splitlines()
        assert len(listing) == 4 and all("H100" in line for line in listing)
        assert "emulated" in ssh(vc, "gpu01", "nvidia-smi").stdout.lower()
        visible = ssh(vc, "gpu02", "CUDA_VISIBLE_DEVICES=1,3 nvidia-smi --query-gpu=index --format=csv,noheader")
        assert visible.stdout.split() == ["0", "1"]
        assert ssh(vc, "ctl", "nvidia-smi", check=False).returncode != 0  # no GPUs declared there
        # nodes reach the local repository on the bridge, and nothing else: no default route
        assert "default" not in ssh(vc, "gpu01", "ip route").stdout
        # the CLI as ssh: one string is a shell command line, options after the node are the command's
        cli = subprocess.run([sys.executable, "-m", "corral", "virtual", "ssh", "--dir", str(tmp_path), "gpu01",
                              "hostname; ip -o route", "|", "grep", "-c", "-v", "default"],
                             capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
        assert (cli.returncode, cli.stdout.splitlines()[0]) == (0, "gpu01"), cli.stderr
        ssh(vc, "gpu01", "apt-get update -q")
        # status via the CLI, as JSON
        assert main(["virtual", "status", "--dir", str(tmp_path), "--json"]) == 0
        status = json.loads(capsys.readouterr().out)
        assert status["ok"] and len(status["nodes"]) == 3
        # idempotent up: a stopped node is started again, the others keep running untouched
        vc.node("gpu02").stop()
        assert main(["virtual", "status", "--dir", str(tmp_path)]) == 1
        rows2 = {r.name: r for r in vc.up()}
        assert rows2["ctl"].pid == rows[0].pid and rows2["gpu01"].pid == rows[1].pid
        assert rows2["gpu02"].running and rows2["gpu02"].pid != rows[2].pid
        pids.append(rows2["gpu02"].pid)
        # the supervisor shell of gpu01 dies, its node does not: status follows the node itself
        n1 = vc.node("gpu01")
        nspawn = n1.nspawn_pid()
        assert nspawn is not None and nspawn != rows[1].pid
        os.kill(rows[1].pid, 9)
        assert vnode._wait_gone(rows[1].pid, 5)
        assert n1.pid() is None and n1.running()
        capsys.readouterr()  # what the earlier commands printed
        assert main(["virtual", "status", "--dir", str(tmp_path), "--json"]) == 0
        again = {r["name"]: r for r in json.loads(capsys.readouterr().out)["nodes"]}
        assert again["gpu01"]["running"] and again["gpu01"]["pid"] == nspawn
        assert ssh(vc, "gpu01", "hostname").stdout.strip() == "gpu01"
        assert {r.name: r for r in vc.up()}["gpu01"].pid == nspawn  # up starts no second nspawn on its disk
        pids.append(nspawn)
    finally:
        vc.down()
    assert leftovers(vc, pids) == []
    assert not (tmp_path / "nodes" / "gpu01").exists()
    assert not os.path.exists(vc.state_file)


def test_virtual_commands_on_a_non_virtual_spec_fail_clearly(tmp_path, capsys):
    (tmp_path / "cluster.yaml").write_text(
        "name: real\nnodes:\n  - {names: ctl, addresses: [10.0.0.1], roles: [controller]}\n"
        "  - {names: 'n[1-2]', addresses: 10.0.0.2-3, roles: [compute]}\n")
    assert main(["virtual", "status", "--dir", str(tmp_path)]) == 2
    assert "not a virtual cluster spec" in capsys.readouterr().err
