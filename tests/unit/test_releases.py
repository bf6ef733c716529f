"""OS releases as data (spec/releases.py), the spec's `nodes[].os` rules, and what differs per release in
the virtual cluster's image and repository, slurmd's unit and Slurm 24.11's configuration files."""

from __future__ import annotations

import ipaddress
from pathlib import Path

import pytest

from corral.errors import HostToolError, SpecError
from corral.render.adopt import MODULE, account_block, module_path
from corral.render.cgroup import render_cgroup_conf
from corral.render.slurm import render_slurm_conf
from corral.spec.loader import load_text
from corral.spec.releases import DEFAULT, RELEASES, by_suite, release, slurm_tuple
from corral.virtual import image, repo
from corral.virtual.defaults import default_spec

FIXTURES = Path(__file__).parent.parent / "fixtures"


def spec(ctl_os: str | None = None, gpu_os: str | None = None, slurm: str = "") -> str:
    line = lambda os_name: f", os: {os_name}" if os_name else ""  # noqa: E731
    return ("name: lab\nnodes:\n"
            f"  - {{names: ctl, addresses: [10.0.0.10], roles: [controller, accounting]{line(ctl_os)}}}\n"
            f"  - {{names: gpu01, addresses: [10.0.0.11], roles: [compute], gpus: {{model: h100, count: 4}}"
            f"{line(gpu_os)}}}\n" + slurm)


def problems(text: str) -> str:
    with pytest.raises(SpecError) as e:
        load_text(text, "cluster.yaml")
    return str(e.value)


def test_the_table_holds_debian_12_and_13_with_their_slurm():
    assert list(RELEASES) == ["debian-12", "debian-13", "ubuntu-22.04", "ubuntu-24.04", "rocky-9"]
    assert DEFAULT == "debian-12" and [n for n, r in RELEASES.items() if r.live] == ["debian-12", "debian-13"]
    assert (release(None).suite, release(None).slurm) == ("bookworm", "22.05")
    assert (release("debian-13").suite, release("debian-13").slurm) == ("trixie", "24.11")
    assert by_suite("trixie") is release("debian-13") and slurm_tuple("debian-13") == (24, 11)
    assert slurm_tuple(None) == (22, 5)
    with pytest.raises(KeyError):
        release("ubuntu-26.04")  # no row


def test_a_spec_without_os_runs_debian_12_as_before():
    cluster = load_text(spec(), "cluster.yaml")
    assert {n.os for n in cluster.nodes} == {"debian-12"} and cluster.releases() == ["debian-12"]
    assert load_text(spec("debian-13", "debian-13"), "cluster.yaml").releases() == ["debian-13"]


def test_an_unknown_os_is_a_located_error_with_a_hint():
    text = problems(spec(gpu_os="debian-14"))
    assert "cluster.yaml:4:" in text and "unknown OS release 'debian-14'" in text and "debian-13" in text


def test_slurm_older_than_the_release_ships_is_refused_where_the_spec_says_it():
    text = problems(spec("debian-13", "debian-13", "slurm: {version: '22.05'}\n"))
    assert "cluster.yaml:5:" in text and "Slurm 22.05 cannot run on debian-13" in text and "24.11" in text
    load_text(spec("debian-13", "debian-13", "slurm: {version: '24.11'}\n"), "cluster.yaml")  # its own: fine
    load_text(spec("debian-13", "debian-13", "slurm: {version: '25.05'}\n"), "cluster.yaml")  # newer: elsewhere
    load_text(spec(slurm="slurm: {version: '23.11'}\n"), "cluster.yaml")  # debian-12 as before


def test_mixed_releases_must_agree_on_the_slurm_major():
    text = problems(spec("debian-12", "debian-13"))
    assert "cluster.yaml:4:" in text and "debian-13 ships Slurm 24.11" in text and "one major release" in text
    # a pinned version both can run: the operator's repository gives it to the debian-12 nodes
    load_text(spec("debian-12", "debian-13", "slurm: {version: '24.11'}\n"), "cluster.yaml")


def test_topology_blocks_follow_the_release_slurm():
    blocks = "topology: {blocks: [{name: nvl1, nodes: gpu01}]}\n"
    assert "topology/block needs Slurm 23.11" in problems(spec() + blocks + "virtual: {subnet: 10.0.0.0/24}\n")
    load_text(spec("debian-13", "debian-13") + blocks + "virtual: {subnet: 10.0.0.0/24}\n", "cluster.yaml")


def test_debian_12_image_recipe_and_repository_are_unchanged():
    assert image.recipe() == {"suite": "bookworm", "variant": "minbase", "include": image.INCLUDE,
                              "version": image.RECIPE_VERSION, "updated": True}
    assert image.image_dir(Path("/c")).name == f"bookworm-{image.recipe_hash()}"
    assert repo.repo_dir(None, Path("/c")) == Path("/c/repo") == repo.repo_dir("debian-12", Path("/c"))


def test_debian_13_has_its_own_image_and_repository():
    assert image.recipe("debian-13")["suite"] == "trixie"
    assert image.recipe_hash("debian-13") != image.recipe_hash()
    assert image.image_dir(Path("/c"), "debian-13").name.startswith("trixie-")
    assert repo.repo_dir("debian-13", Path("/c")) == Path("/c/repo-trixie")


def test_the_private_apt_sources_reach_trixie_only(monkeypatch):
    from corral.virtual import apt_release
    def mirror(suite: str) -> str:  # the host's sources: bookworm only, as on the control host
        if suite != "bookworm":
            raise HostToolError(f"no Debian {suite} 'main' source")
        return "http://m/debian"
    monkeypatch.setattr(apt_release, "debian_mirror", mirror)
    monkeypatch.setattr(apt_release, "_sources_entries",
                        lambda: [(["http://m/debian"], ["bookworm"], ["main"]),
                                 (["http://s/debian-security"], ["bookworm-security"], ["main"])])
    text = apt_release.sources(release("debian-13"))
    sections = "main contrib non-free non-free-firmware"  # non-free: Debian's NVIDIA driver (spec/nvidia_archive.py)
    assert text.splitlines() == [f"deb [signed-by={apt_release.KEYRING}] http://m/debian trixie {sections}",
                                 f"deb [signed-by={apt_release.KEYRING}] http://m/debian trixie-updates {sections}",
                                 f"deb [signed-by={apt_release.KEYRING}] http://s/debian-security trixie-security "
                                 f"{sections}"]
    assert apt_release.options(release("debian-12"), Path("/nonexistent")) == []  # the host's own: no options


def test_slurmd_runs_with_systemd_notify_on_debian_13():
    from corral.deploy.slurm import dropin
    for os_name, fg in (("debian-12", "-D"), ("debian-13", "--systemd")):
        cluster = load_text(spec(os_name, os_name), "cluster.yaml")
        start = [x for x in dropin(cluster, cluster.node("gpu01")).splitlines() if x.startswith("ExecStart=/")]
        assert start == [f"ExecStart=/usr/sbin/slurmd {fg} -s --conf-server 10.0.0.10:6817 -N gpu01 $SLURMD_OPTIONS"]


def test_pam_slurm_adopt_is_named_where_the_release_puts_it():
    assert module_path(None) == MODULE == "/lib/security/pam_slurm_adopt.so"
    assert module_path("debian-13") == "/usr/lib/x86_64-linux-gnu/security/pam_slurm_adopt.so"
    assert f"required     {module_path('debian-13')} nodename=gpu01" in "\n".join(
        account_block("gpu01", module_path("debian-13")))


def _keys(name: str) -> set[str]:
    if name == "slurm.conf":  # read from 24.11's slurm.conf(5) by spec/slurm_man.py (spec/slurm_conf_keys.py)
        from corral.spec.slurm_conf_keys import RELEASES
        return {k for kind in ("global", "partition", "node") for k in RELEASES["24.11"][kind].split()}
    lines = (FIXTURES / f"slurm-24.11-{name}-keys.txt").read_text().splitlines()
    return {x.strip() for x in lines if x.strip() and not x.startswith("#")}


def test_the_24_11_files_use_only_keys_slurm_24_11_documents():
    text = default_spec("deb13", 2, 4, subnet=ipaddress.IPv4Network("10.213.90.0/24"), usable=True,
                        user_key="ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHh3b2V5eW5uZ3dhbGxvd2VkZXhhbXBsZWtleTAx a@b",
                        os_name="debian-13")
    cluster = load_text(text, "cluster.yaml")
    conf = render_slurm_conf(cluster, {}, version=slurm_tuple("debian-13"))
    words = {w.split("=", 1)[0] for line in conf.splitlines() if not line.startswith("#") for w in line.split()
             if "=" in w}
    assert words and words <= _keys("slurm.conf"), words - _keys("slurm.conf")
    assert "SelectType=select/cons_tres" in conf and "CryptoType" not in conf  # cons_res is gone in 24.11
    cgroup = render_cgroup_conf(cluster, version=slurm_tuple("debian-13"))
    keys = {line.split("=", 1)[0] for line in cgroup.splitlines() if "=" in line and not line.startswith("#")}
    assert keys <= _keys("cgroup.conf") and "CgroupAutomount" not in keys, keys - _keys("cgroup.conf")
    assert "CgroupAutomount" in render_cgroup_conf(cluster, version=slurm_tuple("debian-12"))  # 22.05 keeps it


def test_a_new_virtual_cluster_runs_debian_13_and_its_file_says_so():
    text = default_spec("v", 2, 4)
    assert text.count("    os: debian-13\n") == 3 and {n.os for n in load_text(text, "c.yaml").nodes} == {"debian-13"}
    old = default_spec("v", 2, 4, os_name="debian-12", usable=False)
    assert old.count("    os: debian-12\n") == 2 and {n.os for n in load_text(old, "c.yaml").nodes} == {"debian-12"}
    assert "\n    os:" not in default_spec("v", 2, 4, os_name=None)  # a file without `os:` means debian-12
