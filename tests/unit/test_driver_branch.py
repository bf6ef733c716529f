"""nvidia.driver.branch resolved to an exact version (render/driver_branch.py, workflows/driver_branch.py): from a
captured repository index (Debian 13's non-free and contrib, read 2026-12-08: tests/fixtures/nvidia/), from the
nodes' installed driver, and the plan line and the error when nothing on the branch is found."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from corral.errors import UsageError
from corral.render.driver_branch import choose, index_versions, madison_versions
from corral.spec.loader import load_text
from corral.workflows import driver_branch

INDEX = (Path(__file__).parents[1] / "fixtures/nvidia/trixie-non-free.Packages").read_text()
SPEC = """\
name: lab
nodes:
  - {names: ctl, addresses: [10.0.0.10], roles: [controller], os: debian-13}
  - {names: "gpu[01-02]", addresses: [10.0.0.11, 10.0.0.12], roles: [compute], gpus: {model: h100, count: 4},
     os: debian-13}
nvidia: {driver: {branch: "BRANCH", source: distribution}}
"""


def test_a_branch_resolves_to_the_newest_of_it_in_a_captured_index():
    assert index_versions(INDEX, "nvidia-open-kernel-dkms") == ["550.163.01-2"]
    assert choose("550", {"gpu01": None}, index_versions(INDEX, "nvidia-open-kernel-dkms")).version == "550.163.01"
    tesla = index_versions(INDEX, "nvidia-tesla-535-kernel-dkms")
    assert tesla == ["535.274.02-1~deb13u1"] and choose("535", {}, tesla).version == "535.274.02"
    missing = choose("580", {"gpu01": None}, index_versions(INDEX, "nvidia-kernel-dkms"))
    assert missing.version is None and missing.why == ("no version of branch 580 in the nodes' repositories (they "
                                                       "carry 550) and none installed")


def test_the_installed_driver_on_the_branch_wins_over_a_newer_one_so_a_rerun_changes_nothing():
    available = ["550.127.05-1", "550.163.01-2", "560.35.03-1"]
    assert choose("550", {"gpu01": "550.127.05-1", "gpu02": None}, available).version == "550.127.05"
    # another branch installed: the newest of the asked one
    assert choose("550", {"gpu01": "535.274.02-1~deb13u1"}, available).version == "550.163.01"
    assert madison_versions("nvidia-smi | 550.163.01-2 | http://10.0.0.1:8080 ./ Packages\n") == ["550.163.01-2"]


def _fake_nodes(monkeypatch, answers: dict[str, str], package: str = "nvidia-open-kernel-dkms"):
    def run_on(cluster, node, command, *, timeout):
        assert f"apt-cache madison {package}" in command and timeout == driver_branch.ASK_TIMEOUT_S
        return subprocess.CompletedProcess([], 0, answers[node], "")
    monkeypatch.setattr(driver_branch, "run_on", run_on)


def test_the_plan_holds_the_resolved_version_and_says_where_it_came_from(monkeypatch):
    madison = "nvidia-open-kernel-dkms | 550.163.01-2 | http://10.0.0.1:8080 ./ Packages\n"
    _fake_nodes(monkeypatch, {"gpu01": "\n" + madison, "gpu02": "\n" + madison})
    cluster = load_text(SPEC.replace("BRANCH", "550"), "cluster.yaml")
    resolved, line = driver_branch.resolve(cluster)
    assert resolved.spec.nvidia.driver.version == "550.163.01" and resolved.spec.nvidia.driver.branch == "550"
    assert line == ("nvidia.driver.branch 550: 550.163.01 (the newest of the branch in the nodes' repositories); "
                    "this run pins it")
    assert cluster.spec.nvidia.driver.version is None  # the spec itself keeps the branch


def test_an_unresolvable_branch_names_each_nodes_answer(monkeypatch):
    """NVIDIA's repository not (yet) on the nodes: nothing of the branch to choose, said per node."""
    _fake_nodes(monkeypatch, {"gpu01": "\n", "gpu02": "\n"}, package="nvidia-open-580")
    with pytest.raises(UsageError) as e:
        driver_branch.resolve(load_text(SPEC.replace("BRANCH", "580").replace("distribution", "cuda"), "cluster.yaml"))
    assert ("nvidia.driver.branch 580: not resolved to a version: no version of branch 580 in the nodes' repositories "
            "and none installed (gpu01: installed none; gpu02: installed none)") in str(e.value)
    assert "set nvidia.driver.version, or make nvidia-open-580 of branch 580 available" in str(e.value)


@pytest.mark.parametrize("driver,said,fix", [
    ('{branch: "580", source: distribution}', "Debian 13's archive carries no NVIDIA driver of branch 580 (gpu01 runs "
     "debian-13)", "use a branch it carries: 550 (550.163.01), 535 (Tesla, 535.274.02)"),
    ('{version: "550.127.05", source: distribution}', "carries the 550 driver at 550.163.01, not 550.127.05",
     'set version: 550.163.01, or branch: "550" alone'),
    ('{branch: "535", source: distribution, kernel_modules: open}', "Debian builds no open kernel modules for the 535 "
     "branch", "kernel_modules: auto or proprietary"),
])
def test_spec_check_refuses_a_driver_the_archive_does_not_carry_where_it_is_written(driver, said, fix):
    from corral.errors import CorralError
    text = SPEC.replace('{branch: "BRANCH", source: distribution}', driver)
    with pytest.raises(CorralError) as e:
        load_text(text, "cluster.yaml")
    line = next(i for i, t in enumerate(text.splitlines(), 1) if t.startswith("nvidia:"))
    assert f"cluster.yaml:{line}:" in str(e.value) and said in str(e.value) and fix in str(e.value), str(e.value)
    ok = load_text(SPEC.replace("BRANCH", "535"), "cluster.yaml")  # the Tesla branch, auto: proprietary modules
    assert ok.spec.nvidia.driver.branch == "535"


def test_a_bundle_needs_the_exact_driver():
    from corral.errors import CorralError
    text = SPEC.replace("BRANCH", "550") + "packages: {source: bundle, bundle: b.tar}\n"
    with pytest.raises(CorralError, match="a bundle carries one exact driver"):
        load_text(text, "cluster.yaml")
