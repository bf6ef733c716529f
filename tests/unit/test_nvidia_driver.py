"""NVIDIA driver choices (render/nvidia.py) and the rollout's install script and bookkeeping
(workflows/driver_rollout.py), without a node: the script runs against stand-in apt commands."""

from __future__ import annotations

import os
import subprocess

import pytest

from corral.engine.results import NodeResult, OpResult, RunResult
from corral.errors import UsageError
from corral.workflows.driver_rollout import install_script
from corral.render.nvidia import (driver_package, driver_packages, installed_matches, kernel_modules, pin_for,
                                  pin_text, unpinned_packages)
from corral.spec.loader import load_text

SPEC = """\
name: lab
nodes:
  - {names: ctl, addresses: [10.0.0.10], roles: [controller]}
  - {names: h, addresses: [10.0.0.11], roles: [compute], gpus: {model: h100, count: 8}}
  - {names: v, addresses: [10.0.0.12], roles: [compute], gpus: {model: v100, count: 8}}
  - {names: x, addresses: [10.0.0.13], roles: [compute], gpus: {model: mystery, model_unknown_ok: true, count: 2}}
nvidia: {driver: {version: "550.127.05"}}
"""


def cluster(extra: str = ""):
    """The spec with `extra` driver keys; from a release's own archive, on Debian 13 nodes (spec check refuses
    Debian 12's: spec/support.py) with the version Debian 13 carries (spec/rules_driver.py)."""
    text = SPEC.replace('version: "550.127.05"', 'version: "550.127.05"' + extra)
    if "distribution" in extra:
        text = text.replace("count: 8}}", "count: 8}, os: debian-13}").replace("count: 2}}", "count: 2}, os: debian-13}")
        text = text.replace("roles: [controller]}", "roles: [controller], os: debian-13}").replace("550.127.05", "550.163.01")
    return load_text(text, "cluster.yaml")


def test_auto_kernel_modules_follow_the_gpu_generation():
    c = cluster()
    d = c.spec.nvidia.driver
    assert kernel_modules(d, c.node("h")) == "open"          # Hopper
    assert kernel_modules(d, c.node("v")) == "proprietary"   # Volta predates the open modules
    assert kernel_modules(d, c.node("x")) == "proprietary"   # unknown model: the safe choice
    forced = cluster(", kernel_modules: proprietary")
    assert kernel_modules(forced.spec.nvidia.driver, forced.node("h")) == "proprietary"


@pytest.mark.parametrize("extra,os_id,version,node,want", [
    ("", "debian", "12", "h", "nvidia-open-550"),
    ("", "debian", "12", "v", "cuda-drivers-550"),
    ("", "ubuntu", "22.04", "h", "nvidia-open-550"),
    (", source: distribution", "ubuntu", "24.04", "h", "nvidia-driver-550-server-open"),
    (", source: distribution", "ubuntu", "22.04", "v", "nvidia-driver-550-server"),
    (", package: corral-test-nvidia-driver", "rocky", "9", "h", "corral-test-nvidia-driver"),
])
def test_driver_package_per_os(extra, os_id, version, node, want):
    c = cluster(extra)
    assert driver_package(c.spec.nvidia.driver, c.node(node), os_id, version) == want


def test_unsupported_os_is_a_clear_error():
    c = cluster(", source: distribution")
    with pytest.raises(UsageError, match="cannot install the NVIDIA driver 550 on debian 12 from 'distribution'"):
        driver_package(c.spec.nvidia.driver, c.node("h"), "debian", "12")
    with pytest.raises(UsageError, match=r"Debian 13's archive carries the branches 550 \(550.163.01\), 535 "
                                         r"\(Tesla, 535.274.02\)"):
        driver_package(cluster(", source: distribution").spec.nvidia.driver.model_copy(update={"version": "580.1.2"}),
                       c.node("h"), "debian", "13")


@pytest.mark.parametrize("version,node,want", [
    ("550.163.01", "h", ["nvidia-open-kernel-dkms", "nvidia-smi", "libcuda1", "libnvidia-ml1"]),  # Hopper: open
    ("550.163.01", "v", ["nvidia-kernel-dkms", "nvidia-smi", "libcuda1", "libnvidia-ml1"]),
    # the Tesla branch: Debian builds no open modules for it, so auto takes the proprietary ones even on Hopper
    ("535.274.02", "h", ["nvidia-tesla-535-kernel-dkms", "nvidia-tesla-535-smi", "libnvidia-tesla-535-cuda1",
                         "libnvidia-tesla-535-ml1"]),
])
def test_debian_13_archive_driver_is_the_headless_set_of_its_branch(version, node, want):
    c = cluster(", source: distribution")
    driver = c.spec.nvidia.driver.model_copy(update={"version": version})
    assert driver_packages(driver, c.node(node), "debian", "13") == want
    assert unpinned_packages(driver, "debian") == ["nvidia-persistenced"]  # its own source package, any branch
    pin = pin_for(want, version, overridden=False)
    # libcuda1 is the one name the patterns miss: named, so it is held with the rest
    assert pin.splitlines()[1] == f"Package: {want[0]} " + ("libcuda1 " if "libcuda1" in want else "") + \
        "nvidia-* libnvidia-* cuda-drivers*"
    assert f"Pin: version {version}-*" in pin


def test_branch_alone_names_the_packages_and_needs_no_version():
    c = cluster(", source: distribution")
    driver = c.spec.nvidia.driver.model_copy(update={"version": None, "branch": "535"})
    assert driver.version is None and driver_package(driver, c.node("v"), "debian", "13") == \
        "nvidia-tesla-535-kernel-dkms"
    with pytest.raises(Exception, match="not on branch 535"):
        load_text(SPEC.replace('version: "550.127.05"', 'version: "550.1.2", branch: "535"'), "cluster.yaml")
    with pytest.raises(Exception, match="needs `version`"):
        load_text(SPEC.replace('version: "550.127.05"', 'source: cuda'), "cluster.yaml")


def test_pin_holds_every_driver_package_at_the_version():
    text = pin_text("nvidia-open-550", "550.127.05", overridden=False)
    assert "Package: nvidia-open-550 nvidia-* libnvidia-* cuda-drivers*\nPin: version 550.127.05-*\nPin-Priority: 1001" in text
    assert installed_matches("550.127.05-0ubuntu1", "550.127.05") and not installed_matches("550.144.03-1", "550.127.05")
    assert not installed_matches(None, "550.127.05") and installed_matches("1:1.1-1", "1.1")


def test_pending_lists_only_healthy_nodes_with_a_reboot_change():
    from corral.engine.handoff import DRIVER, Handoff
    from corral.workflows.node_rollout import pending
    handed = Handoff(DRIVER, "1.0", "1.1")
    r = RunResult(run_id="x", command="apply", mode="apply", spec_hash="h", started="t")
    r.nodes["a"] = NodeResult("a", "10.0.0.1", ops=[OpResult("nvidia driver | NVIDIA driver 1.1", "changed",
                                                             disruption="reboot + drain", rollout=handed)])
    r.nodes["b"] = NodeResult("b", "10.0.0.2", ops=[OpResult("x", "changed", disruption="restart slurmd")])
    r.nodes["c"] = NodeResult("c", "10.0.0.3", error="boom",
                              ops=[OpResult("nvidia driver | NVIDIA driver 1.1", "changed", disruption="reboot + drain",
                                            rollout=handed)])
    assert pending(r, DRIVER) == ["a"]


def fake_apt(tmp_path, candidate: str, install_rc: int = 0):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "apt-get").write_text(f"#!/bin/sh\necho \"apt-get $*\" >> {tmp_path}/log\n"
                                     f"case \"$1\" in install) exit {install_rc};; esac\nexit 0\n")
    (bin_dir / "apt-cache").write_text(f"#!/bin/sh\necho '  Installed: 1.0-1'\necho '  Candidate: {candidate}'\n")
    for f in bin_dir.iterdir():
        f.chmod(0o755)
    return dict(os.environ, PATH=f"{bin_dir}:{os.environ['PATH']}")


def run_script(tmp_path, env, version="1.1"):
    pin = tmp_path / "pin"
    pin.write_text("OLD PIN\n")
    script = install_script(["corral-test-nvidia-driver"], version,
                            pin_text("corral-test-nvidia-driver", version, True), pin_path=str(pin))
    return subprocess.run(["sh", "-c", script], env=env, capture_output=True, text=True), pin


def test_install_script_pins_then_installs(tmp_path):
    proc, pin = run_script(tmp_path, fake_apt(tmp_path, "1.1-1"))
    assert proc.returncode == 0, proc.stderr
    assert "Pin: version 1.1-*" in pin.read_text() and not (tmp_path / "pin.corral-old").exists()
    assert "install -y -q --no-install-recommends --allow-downgrades" in (tmp_path / "log").read_text()


def test_install_script_refuses_another_candidate_and_restores_the_pin(tmp_path):
    proc, pin = run_script(tmp_path, fake_apt(tmp_path, "1:1.10-1"))
    assert proc.returncode == 3 and "1.1 is not available" in proc.stderr and "candidate: 1.10-1" in proc.stderr
    assert pin.read_text() == "OLD PIN\n" and "install" not in (tmp_path / "log").read_text().replace("apt-get update", "")


def test_install_script_restores_the_pin_when_apt_fails(tmp_path):
    proc, pin = run_script(tmp_path, fake_apt(tmp_path, "1.1-1", install_rc=100))
    assert proc.returncode == 1 and pin.read_text() == "OLD PIN\n"


def test_install_script_brings_debians_companions_and_the_running_kernels_headers(tmp_path):
    """Debian's archive driver: nvidia-persistenced at its own version (not candidate-checked) and, on real servers,
    the running kernel's headers for DKMS; no headers in the repositories: refused before anything is installed."""
    packages = ["nvidia-kernel-dkms", "nvidia-smi", "libcuda1", "libnvidia-ml1"]
    env = fake_apt(tmp_path, "550.163.01-2")
    pin = tmp_path / "pin"
    script = install_script(packages, "550.163.01", pin_for(packages, "550.163.01", False), pin_path=str(pin),
                            also=("nvidia-persistenced",), headers=True)
    proc = subprocess.run(["sh", "-c", script], env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    kernel = os.uname().release
    assert (f"--force-confold nvidia-kernel-dkms nvidia-smi libcuda1 libnvidia-ml1 nvidia-persistenced "
            f"linux-headers-{kernel}") in (tmp_path / "log").read_text()
    (tmp_path / "bin" / "apt-cache").write_text("#!/bin/sh\n[ \"$1\" = show ] && exit 100\necho '  Candidate: 550.163.01-2'\n")
    (tmp_path / "log").unlink()
    pin.write_text("OLD PIN\n")
    proc = subprocess.run(["sh", "-c", script], env=env, capture_output=True, text=True)
    assert proc.returncode == 3 and f"no linux-headers-{kernel} in this node's repositories" in proc.stderr
    assert "install" not in (tmp_path / "log").read_text().replace("apt-get update", "")
    assert pin.read_text() == "OLD PIN\n"  # the pin it had


def test_fabric_manager_follows_the_driver_branch():
    from corral.render.nvidia import fabricmanager_package
    assert fabricmanager_package(cluster().spec.nvidia.driver) == "nvidia-fabricmanager-550"


def test_install_script_installs_driver_and_fabric_manager_together(tmp_path):
    env = fake_apt(tmp_path, "550.127.05-1")
    pin = tmp_path / "pin"
    script = install_script(["nvidia-open-550", "nvidia-fabricmanager-550"], "550.127.05",
                            pin_text("nvidia-open-550", "550.127.05", False), pin_path=str(pin))
    proc = subprocess.run(["sh", "-c", script], env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "install -y -q --no-install-recommends --allow-downgrades -o Dpkg::Options::=--force-confold nvidia-open-550 nvidia-fabricmanager-550" \
        in (tmp_path / "log").read_text()

