"""Slurm's upgrade window (spec/slurm_releases.py): two major releases back, three for a target
from 24.11 on (Slurm's Upgrade Guide); downgrades refused; messages name slurm.version, the node,
both versions and the way there."""

from __future__ import annotations

import pytest

from corral.spec.slurm_releases import RELEASES, major, matches, refusal, steps, window


def test_releases_in_order_and_the_window_changes_at_24_11():
    assert list(RELEASES) == sorted(RELEASES, key=lambda v: tuple(map(int, v.split("."))))
    assert {"22.05", "23.02", "23.11", "24.05", "24.11", "25.05", "25.11"} <= set(RELEASES)
    assert [window(v) for v in ("23.02", "23.11", "24.05", "24.11", "25.05")] == [2, 2, 2, 3, 3]


@pytest.mark.parametrize("installed,requested", [
    ("22.05.8", "22.05"), ("22.05.8", "22.05.8"), ("22.05.8", "22.05.9"), ("22.05.8", "23.02"),
    ("22.05.8", "23.11"), ("23.02.7", "24.05.1"), ("23.02.7", "24.11"), ("24.05.4", "25.05"),
    ("24.11.5", "26.05"), ("24.11.5", "26.05.5")])  # 24.11 -> 26.05: three back, what 26.05 allows
def test_allowed(installed, requested):
    assert refusal("gpu01", installed, requested) is None


def test_matches_a_major_or_an_exact_release():
    assert matches("22.05.8", "22.05") and matches("22.05.8", "22.05.8")
    assert not matches("22.05.8", "22.05.9") and not matches("22.05.8", "23.02") and not matches("23.02.1", "22.05")


def test_a_jump_too_far_names_the_way_there():
    message, fix = refusal("gpu01", "22.05.8", "25.05")
    assert message == ("slurm.version 25.05: gpu01 runs 22.05.8; Slurm upgrades at most 2 major releases at a time "
                       "(22.05 -> 23.11 -> 25.05)")
    assert fix == "set 23.11, apply, then 25.05, applying each in turn"
    assert steps("22.05.8", "25.05") == ["23.11", "25.05"]
    assert steps("22.05.8", "25.11") == ["23.11", "25.05", "25.11"]  # 23.11 -> 25.05: three back, 25.05 allows it
    assert refusal("gpu01", "22.05.8", "24.05")[0].endswith("(22.05 -> 23.11 -> 24.05)")
    # Debian 12's Slurm to Debian 13's: four releases, more than 24.11 accepts
    message, fix = refusal("gpu01", "22.05.8", "24.11")
    assert message.endswith("at most 2 major releases at a time (22.05 -> 23.11 -> 24.11)")
    assert fix == "set 23.11, apply, then 24.11, applying each in turn"
    assert steps("23.11.4", "26.05") == ["25.05", "26.05"]  # each step the farthest its target accepts


@pytest.mark.parametrize("installed,requested", [("23.02.7", "22.05"), ("22.05.8", "22.05.7"),
                                                 ("23.11.1", "23.02.7")])
def test_downgrades_refused(installed, requested):
    message, fix = refusal("ctl", installed, requested)
    assert message.startswith(f"slurm.version {requested}: ctl runs {installed}; a downgrade")
    assert major(installed) in fix


def test_unknown_releases_refused():
    assert "not a Slurm major release corral knows" in refusal("ctl", "22.05.8", "22.06")[0]
    assert "older than the releases corral knows" in refusal("ctl", "19.05.5", "20.02")[0]


def test_the_pin_holds_a_major_or_an_exact_release():
    from corral.render.slurm_pin import pin_text, version_glob
    assert version_glob("22.05") == "22.05.*" and version_glob("22.05.8") == "22.05.8-*"
    text = pin_text("23.02")
    assert "Pin: version 23.02.*\nPin-Priority: 1001\n" in text
    assert all(p in text.split("\n")[1].split() for p in ("slurmctld", "slurmd", "slurmdbd", "slurm-client",
                                                          "libpam-slurm-adopt"))


def test_the_install_script_writes_the_pin_and_keeps_daemons_as_they_are():
    from corral.workflows.slurm_daemons import install_script
    script = install_script("23.02")
    assert "Pin: version 23.02.*" in script and "/etc/apt/preferences.d/corral-slurm" in script
    assert "exit 101" in script and script.index("policy-rc.d") < script.index("apt-get install")
