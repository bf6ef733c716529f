"""A Slurm major newer than a release ships (virtual/slurm_more.py, spec/releases.py `slurm_more`): asked
for only by slurm.version, kept in a repository of its own, a relaxed dependency said in the version
(virtual/suite_packages.py, which makes every such set)."""

from __future__ import annotations

import pytest

from corral.errors import HostToolError
from corral.spec.releases import release
from corral.virtual.slurm_more import subdir, wanted
from corral.virtual.suite_packages import SUFFIX, relax

CONTROL = ("Package: slurmd\nSource: slurm-wlm\nVersion: 26.05.5-1\nArchitecture: amd64\n"
           "Depends: libc6 (>= 2.38), libhwloc15 (>= 2.15.0), libnuma1 (>= 2.0.11), ucf\nDescription: x\n")


def test_only_a_major_the_release_gets_elsewhere_is_wanted():
    trixie = release("debian-13")
    assert wanted(trixie, None) is None and wanted(trixie, "24.11") is None  # its own archive's
    major, src = wanted(trixie, "26.05")
    assert major == "26.05" and src.version.startswith("26.05.") and src.suite == "unstable"
    assert wanted(trixie, "26.05.5")[0] == "26.05" and subdir("26.05") == "slurm-26.05"
    assert wanted(release("debian-12"), "26.05") is None  # bookworm: no such row
    assert {"slurmctld", "slurmd", "slurmdbd", "slurm-client", "libpam-slurm-adopt"} <= set(src.packages)


def test_the_relaxed_dependency_is_rewritten_and_the_version_says_so():
    out = relax(CONTROL, "libhwloc15 (>= 2.15.0)", "libhwloc15 (>= 2.12.0)")
    assert "libhwloc15 (>= 2.12.0)" in out and "2.15.0" not in out
    assert f"Version: 26.05.5-1{SUFFIX}\n" in out and out.count("Version:") == 1
    assert out.replace("2.12.0", "2.15.0").replace(SUFFIX, "") == CONTROL


def test_a_dependency_not_there_is_an_error_not_a_silent_repack():
    with pytest.raises(HostToolError, match="to relax is not in the package's control file"):
        relax(CONTROL, "libhwloc15 (>= 2.16.0)", "libhwloc15 (>= 2.12.0)")


def test_a_real_cluster_asking_for_a_slurm_its_release_lacks_is_warned_where_it_comes_from():
    from corral.spec.loader import load_text
    from corral.spec.rules import scheduler_warnings
    spec = ("name: c\nnodes:\n  - {names: ctl, addresses: [10.0.0.10], roles: [controller, accounting], os: debian-13}\n"
            "  - {names: gpu01, addresses: [10.0.0.11], roles: [compute], os: debian-13}\n")
    said = scheduler_warnings(load_text(spec + "slurm: {version: '26.05'}\n", "c.yaml"))
    assert any("trixie ships Slurm 24.11; the virtual cluster serves Debian unstable's 26.05.5-1 packages, so "
               "debian-13 nodes need a repository that has Slurm 26.05" in w for w in said), said
    assert not [w for w in scheduler_warnings(load_text(spec + "slurm: {version: '24.11'}\n", "c.yaml"))
                if "slurm.version" in w]
    virtual = spec + "slurm: {version: '26.05'}\nvirtual: {subnet: 10.0.0.0/24}\n"
    assert not [w for w in scheduler_warnings(load_text(virtual, "c.yaml")) if "slurm.version" in w]


def test_the_cached_set_is_known_by_its_files_hashes(tmp_path):
    from corral.virtual.suite_packages import files as _files
    pool = tmp_path / "pool"
    assert _files(pool) == {}
    pool.mkdir()
    (pool / "slurmd_26.05.5-1+corral1_amd64.deb").write_bytes(b"good")
    (pool / "notes.txt").write_text("not a package")
    made = _files(pool)
    assert list(made) == ["slurmd_26.05.5-1+corral1_amd64.deb"]
    (pool / "slurmd_26.05.5-1+corral1_amd64.deb").write_bytes(b"a broken stand-in left behind")
    assert _files(pool) != made  # ensure() then fetches the set again
