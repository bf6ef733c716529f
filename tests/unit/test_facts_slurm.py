"""Slurm facts (corral.facts.slurm): Debian versions, the hardware facts cache."""

from __future__ import annotations

import json
import os
import stat

import pytest

from corral.errors import CorralError
from corral.facts.slurm import (
    HW_CACHE, hw_from_json, hw_to_json, installed_in, load_hw_cache, parse_slurm_version, save_hw_cache,
    upstream_version,
)
from corral.facts.records import NodeHW

# --- version -------------------------------------------------------------------------------------


@pytest.mark.parametrize("deb,up", [
    ("22.05.8-4+deb12u3", "22.05.8"), ("1:23.11.4-1.2ubuntu5", "23.11.4"), ("24.05.4", "24.05.4"),
])
def test_upstream_version(deb, up):
    assert upstream_version(deb) == up


def test_a_half_upgraded_node_counts_at_its_oldest_package():
    # a slurmd whose new package failed to install (preinst) beside plugins already at the new version:
    # the next apply must still see 24.11 there and upgrade it again
    lines = ["ii 26.05.5-1", "iU 26.05.5-1+corral1", "ii 24.11.5-4+deb13u1", "rc 22.05.8-4", "slurm-wlm 26.05.5"]
    assert parse_slurm_version(lines) == "24.11.5"
    assert installed_in({"slurm-wlm-basic-plugins": "26.05.5-1", "slurmd": "24.11.5-4+deb13u1"}) == "24.11.5"
    assert installed_in({"slurm-wlm-basic-plugins": "26.05.5-1", "slurmd": "26.05.5-1+corral1"}) == "26.05.5"
    assert parse_slurm_version(["iU 9.10.1-1", "ii 10.2.0-1"]) == "9.10.1"  # numeric order, not text order
    assert parse_slurm_version(["rc 22.05.8-4", "slurm 23.02.7"]) == "23.02.7"  # config files only: sinfo's
    assert installed_in({}) is None and parse_slurm_version([]) is None


@pytest.mark.parametrize("deb,up", [
    ("26.05.5-1+corral1", "26.05.5"), ("24.05.0~rc1-1", "24.05.0~rc1"), ("2:1.2-3-4", "1.2-3"),
])
def test_upstream_version_is_debians_parse(deb, up):
    assert upstream_version(deb) == up


def test_not_a_debian_version_is_a_corral_error():
    with pytest.raises(CorralError, match="not a Debian package version"):
        upstream_version("(none)")


def test_the_oldest_package_in_dpkgs_order():
    # a release candidate comes before its release (dpkg's ~), whichever package dpkg lists first;
    # the hand-written key read both as (24, 5, 0) and took the first listed
    assert parse_slurm_version(["ii 24.05.0-1", "iU 24.05.0~rc1-1"]) == "24.05.0~rc1"
    assert parse_slurm_version(["ii 24.05.0~rc1-1", "iU 24.05.0-1"]) == "24.05.0~rc1"
    # an epoch says nothing of Slurm's release order: 22.05 is older than 23.02 with or without one
    assert parse_slurm_version(["ii 1:22.05.8-1", "ii 23.02.1-1"]) == "22.05.8"


# --- hardware facts cache ------------------------------------------------------------------------

HW = {"gpu02": NodeHW(64, 2, 16, 2, 515000), "gpu01": NodeHW(2, 1, 2, 1, 24000)}


def test_cache_round_trip(tmp_path):
    path = save_hw_cache(tmp_path, HW)
    assert path == tmp_path / HW_CACHE
    assert load_hw_cache(tmp_path) == HW
    assert list(json.loads(path.read_text())) == ["gpu01", "gpu02"]  # sorted: stable diffs


def test_cache_is_private_and_written_atomically(tmp_path):
    save_hw_cache(tmp_path / "state", HW)
    save_hw_cache(tmp_path / "state", {"gpu01": HW["gpu01"]})
    assert stat.S_IMODE(os.stat(tmp_path / "state" / HW_CACHE).st_mode) == 0o600
    assert os.listdir(tmp_path / "state") == [HW_CACHE]  # no temporary file left behind
    assert load_hw_cache(tmp_path / "state") == {"gpu01": HW["gpu01"]}


def test_cache_missing_is_empty(tmp_path):
    assert load_hw_cache(tmp_path) == {}


@pytest.mark.parametrize("content", ["{not json", "[]", '{"gpu01": {"cpus": 2}}',
                                     '{"gpu01": {"cpus": "2", "sockets": 1, "cores_per_socket": 2, '
                                     '"threads_per_core": 1, "memory_mb": 1}}'])
def test_cache_invalid_is_an_error_naming_the_file(tmp_path, content):
    (tmp_path / HW_CACHE).write_text(content)
    with pytest.raises(CorralError, match=HW_CACHE) as err:
        load_hw_cache(tmp_path)
    assert "delete the file" in str(err.value)


def test_hw_json_round_trip():
    hw = NodeHW(8, 1, 4, 2, 32000)
    assert hw_to_json(hw) == {"cpus": 8, "sockets": 1, "cores_per_socket": 4, "threads_per_core": 2,
                              "memory_mb": 32000, "gpu_cores": [], "gpu_links": []}
    assert hw_from_json(hw_to_json(hw)) == hw
    gpu = NodeHW(8, 1, 4, 2, 32000, gpu_cores=("0-3", "0-3"), gpu_links=("-1,18", "18,-1"))
    assert hw_from_json(hw_to_json(gpu)) == gpu
    old_cache = {"cpus": 8, "sockets": 1, "cores_per_socket": 4, "threads_per_core": 2, "memory_mb": 32000}
    assert hw_from_json(old_cache) == hw  # caches written before the GPU topology fields still load
    with pytest.raises(ValueError):
        hw_from_json({**hw_to_json(hw), "extra": 1})
