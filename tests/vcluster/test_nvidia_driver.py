"""NVIDIA driver lifecycle on a real virtual cluster with TEST stand-in packages
(corral-test-nvidia-driver 1.0, 1.1 and a broken 1.2; tests/vcluster/standin.py): the real apt
flow, pinning, plan's "reboot + drain", and apply's drain -> wait for jobs -> install -> reboot
(the nspawn node really reboots) -> verify -> resume; a failed verification leaves the node drained."""

from __future__ import annotations

import json
import time

import pytest

from corral.cli.main import main
from corral.workflows.converge import converge
from corral.spec.loader import load
from corral.virtual.repo import start_server, stop_server
from tests.vcluster.conftest import TEST_SUBNET, make_spec, ssh, vcluster_unavailable
from tests.vcluster.standin import PACKAGE, build_repo

pytestmark = pytest.mark.vcluster
PORT = 18081
DRIVER = ("nvidia:\n  driver: {{version: \"{v}\", package: " + PACKAGE + "}}\n"
          "  rollout: {{drain_timeout_s: 60, reboot_timeout_s: 180}}\n")


@pytest.fixture(scope="module")
def drv(tmp_path_factory):
    reason = vcluster_unavailable()
    if reason:
        pytest.skip(reason)
    from corral.virtual.cluster import VirtualCluster
    work = tmp_path_factory.mktemp("vcdrv")
    path = make_spec(work, name="cdrv", compute=1)
    base = path.read_text()
    path.write_text(base + DRIVER.format(v="1.0"))
    repo = build_repo(work / "test-repo", {"1.0": False, "1.1": False, "1.2": True})
    gateway = str(TEST_SUBNET.network_address + 1)
    vc = VirtualCluster(load(path))
    server = None
    try:
        vc.up()
        server = start_server(repo, gateway, PORT, work / "test-repo.log")
        ssh(vc, "gpu01", f"echo 'deb [trusted=yes] http://{gateway}:{PORT} ./' > /etc/apt/sources.list.d/corral-test.list")
        vc.base_spec = base  # noqa: B010 - the tests rewrite the driver section
        yield vc
    finally:
        if server:
            stop_server(server)
        vc.down()


def set_version(vc, version: str):
    vc.cluster.path.write_text(vc.base_spec + DRIVER.format(v=version))
    return load(vc.cluster.path)


def driver_on(vc) -> str:
    return ssh(vc, "gpu01", "nvidia-smi --query-gpu=driver_version --format=csv,noheader | sort -u").stdout.strip()


def slurm_state(vc) -> str:
    return ssh(vc, "ctl", "sinfo -h -n gpu01 -o '%T|%E'").stdout.strip()


def rollout_ops(result, node="gpu01"):
    return [(o.name.removeprefix("driver rollout | "), o.status) for o in result.nodes[node].ops
            if o.name.startswith("driver rollout")]


def test_first_apply_installs_and_pins_the_driver_through_a_reboot(drv):
    assert driver_on(drv) == "emulated"  # no driver package yet
    result = converge(set_version(drv, "1.0"), "apply", command="test-driver-1.0")
    assert result.ok, json.dumps(result.to_json(), indent=1)[:3000]
    assert rollout_ops(result) == [("drain", "changed"), ("wait for jobs", "changed"), ("install", "changed"),
                                   ("reboot", "changed"), ("verify", "changed"), ("resume", "changed")]
    assert driver_on(drv) == "1.0"
    assert slurm_state(drv).startswith("idle")
    assert "ctl" not in {n for n, r in result.nodes.items() if any(o.name.startswith("driver") for o in r.ops)}


def test_second_apply_changes_nothing(drv):
    result = converge(load(drv.cluster.path), "apply", command="test-driver-noop")
    assert result.ok and result.changed == 0, [(n, o.name) for n, r in result.nodes.items() for o in r.ops
                                               if o.status == "changed"]


def test_the_pin_holds_an_upgrade_back(drv):
    out = ssh(drv, "gpu01", "apt-get update -q >/dev/null; DEBIAN_FRONTEND=noninteractive apt-get install -y -q "
                            f"--only-upgrade {PACKAGE} 2>&1; dpkg-query -W -f '${{Version}}' {PACKAGE}").stdout
    assert out.endswith("1.0-1") and "1.1-1" in ssh(drv, "gpu01", f"apt-cache madison {PACKAGE}").stdout
    policy = ssh(drv, "gpu01", f"apt-cache policy {PACKAGE}").stdout
    assert "Candidate: 1.0-1" in policy


def test_a_new_version_shows_in_plan_as_reboot_and_drain(drv, capsys):
    set_version(drv, "1.1")
    assert main(["plan", "-f", str(drv.cluster.path)]) == 0
    out = capsys.readouterr().out
    assert "~ nvidia driver | NVIDIA driver 1.1  [reboot + drain]" in out
    assert f"{PACKAGE}: 1.0-1 -> 1.1\n      (drain, wait for jobs, install, reboot, verify, resume" in out
    assert driver_on(drv) == "1.0" and slurm_state(drv).startswith("idle")  # plan changed nothing


def test_apply_waits_for_the_running_job_then_upgrades(drv):
    job = ssh(drv, "ctl", "sbatch --parsable -A research -w gpu01 --gres=gpu:1 --wrap 'sleep 10'").stdout.strip()
    for _ in range(30):
        if ssh(drv, "ctl", f"squeue -h -j {job} -o %T").stdout.strip() == "RUNNING":
            break
        time.sleep(0.5)
    result = converge(set_version(drv, "1.1"), "apply", command="test-driver-1.1")
    assert result.ok, json.dumps(result.to_json(), indent=1)[:3000]
    assert [s for s, _ in rollout_ops(result)] == ["drain", "wait for jobs", "install", "reboot", "verify", "resume"]
    state = ssh(drv, "ctl", f"sacct -n -X -j {job} -o State").stdout.split()
    assert state == ["COMPLETED"]  # the job ran to its end; the reboot came after it
    assert driver_on(drv) == "1.1" and slurm_state(drv).startswith("idle")


def test_a_driver_that_fails_verification_leaves_the_node_drained(drv):
    result = converge(set_version(drv, "1.2"), "apply", command="test-driver-broken")
    assert not result.ok and result.nodes["ctl"].ok
    assert rollout_ops(result)[-1] == ("verify", "failed")
    assert "nvidia-smi failed" in result.nodes["gpu01"].error and "left drained" in result.nodes["gpu01"].error
    state, _, reason = slurm_state(drv).partition("|")
    assert state.startswith("drain") and reason.startswith("corral: driver 1.2 verify failed")
    # back to a good version: the rollout takes over its own drain and resumes the node
    result = converge(set_version(drv, "1.1"), "apply", command="test-driver-back")
    assert result.ok, json.dumps(result.to_json(), indent=1)[:3000]
    assert driver_on(drv) == "1.1" and slurm_state(drv).startswith("idle")


def test_a_driver_installed_but_not_running_is_rebooted_into(drv, capsys):
    # as after an upgrade outside corral: the spec's version on disk, another module still running
    ssh(drv, "gpu01", "sed -i 's/Module  [0-9.]*/Module  1.0/' /run/corral-emulated/proc-driver/nvidia/version")
    assert main(["plan", "-f", str(drv.cluster.path)]) == 0
    out = capsys.readouterr().out
    assert "~ nvidia driver | NVIDIA driver 1.1  [reboot + drain]" in out
    assert "nvidia kernel module: 1.0 running, 1.1 installed: reboot required" in out
    result = converge(load(drv.cluster.path), "apply", command="test-driver-loaded")
    assert result.ok, json.dumps(result.to_json(), indent=1)[:3000]
    assert [s for s, _ in rollout_ops(result)] == ["drain", "wait for jobs", "install", "reboot", "verify", "resume"]
    assert "Module  1.1 " in ssh(drv, "gpu01", "cat /proc/driver/nvidia/version").stdout
    assert slurm_state(drv).startswith("idle")
