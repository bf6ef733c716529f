"""enroot + pyxis without a node: spec checks, rendered files, the enroot install script against
stand-in curl/apt-get, and the prolog/epilog's per-user directories (node/jobdirs.py) including a
user's planted links. The operations (snapshot in -> commands or a no-op out) are tested by their
cases in tests/operations/release_debs/ and pyxis_build/."""

from __future__ import annotations

import hashlib
import os
import subprocess

import pytest

from corral.errors import SpecError
from corral.node import jobdirs
from corral.render.containers import (PYXIS_SO, enroot_conf, plugstack_conf, pyxis_build_script, pyxis_mark,
                                      user_dirs)
from corral.render.debs import release_debs_script
from corral.spec.containers import EnrootSpec, PyxisSpec


def enroot_install_script(e: EnrootSpec) -> str:
    return release_debs_script("enroot", "nvidia.enroot.sha256", e.packages, e.version, e.url, e.sha256)
from corral.spec.loader import load_text

SPEC = """\
name: lab
nodes:
  - {names: ctl, addresses: [10.0.0.10], roles: [controller]}
  - {names: gpu01, addresses: [10.0.0.11], roles: [compute], gpus: {model: h100, count: 8}}
nvidia:
"""


def problems(nvidia: str) -> str:
    with pytest.raises(SpecError) as e:
        load_text(SPEC + nvidia, "cluster.yaml")
    return str(e.value)


def test_spec_errors_say_what_and_where():
    assert "cluster.yaml:6:10: nvidia.pyxis needs nvidia.enroot: pyxis runs containers with enroot" in \
        problems("  pyxis: {version: 0.20.0}\n")
    assert "only $(id -u) and $(id -g) may stand in a path" in \
        problems("  enroot: {version: 3.5.0, data_path: /scratch/$USER}\n")
    assert "not / /tmp /run /var" in problems("  enroot: {version: 3.5.0, runtime_path: /tmp}\n")
    assert "checksum of a package not installed" in problems("  enroot: {version: 3.5.0, sha256: {enroot-x: "
                                                             + "a" * 64 + "}}\n")
    assert "set ENROOT_DATA_PATH with runtime_path / cache_path / data_path" in \
        problems("  enroot: {version: 3.5.0, settings: {ENROOT_DATA_PATH: /x}}\n")
    assert "pyxis.args.runtime_path: not one word of letters" in \
        problems("  enroot: {version: 3.5.0}\n  pyxis: {version: 0.20.0, args: {runtime_path: a b}}\n")


def test_enroot_conf_and_plugstack_from_the_spec():
    e = EnrootSpec(version="3.5.0", settings={"ENROOT_SQUASH_OPTIONS": "-comp lz4"})
    assert enroot_conf(e).splitlines()[1:] == ["ENROOT_RUNTIME_PATH /run/enroot/user-$(id -u)",
                                               "ENROOT_CACHE_PATH /var/lib/enroot/cache/group-$(id -g)",
                                               "ENROOT_DATA_PATH /var/lib/enroot/data/user-$(id -u)",
                                               "ENROOT_SQUASH_OPTIONS -comp lz4"]
    assert plugstack_conf(None).endswith("# none\n")
    p = PyxisSpec(version="0.20.0", args={"runtime_path": "/run/pyxis", "container_scope": "job"})
    assert plugstack_conf(p).splitlines()[-1] == f"required {PYXIS_SO} container_scope=job runtime_path=/run/pyxis"
    assert [d["path"].format(uid=7, gid=8) for d in user_dirs(e)] == [
        "/run/enroot/user-7", "/var/lib/enroot/data/user-7", "/var/lib/enroot/cache/group-8"]
    assert [(d["clean"], d["shared"]) for d in user_dirs(e)] == [(True, False), (True, False), (False, True)]
    assert user_dirs(None) == []



def fake_tools(tmp_path, payload: bytes):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(parents=True)
    src = tmp_path / "payload"
    src.write_bytes(payload)
    (bin_dir / "curl").write_text(f"#!/bin/sh\nwhile [ $# -gt 1 ]; do [ \"$1\" = -o ] && out=$2; shift; done\n"
                                  f"echo \"curl $1\" >> {tmp_path}/log; cp {src} \"$out\"\n")
    (bin_dir / "apt-get").write_text(f"#!/bin/sh\necho \"apt-get $*\" >> {tmp_path}/log\n")
    (bin_dir / "dpkg").write_text("#!/bin/sh\necho arm64\n")
    for f in bin_dir.iterdir():
        f.chmod(0o755)
    return dict(os.environ, PATH=f"{bin_dir}:{os.environ['PATH']}")


def test_enroot_script_downloads_for_the_node_arch_checks_and_installs(tmp_path):
    payload = b"a deb"
    good = hashlib.sha256(payload).hexdigest()
    e = EnrootSpec(version="3.5.0", sha256={"enroot": good, "enroot+caps": good})
    proc = subprocess.run(["bash", "-c", enroot_install_script(e)], env=fake_tools(tmp_path, payload),
                          capture_output=True, text=True)
    log = (tmp_path / "log").read_text()
    assert proc.returncode == 0, proc.stderr
    assert "curl https://github.com/NVIDIA/enroot/releases/download/v3.5.0/enroot+caps_3.5.0-1_arm64.deb" in log
    assert "apt-get install -y -q --no-install-recommends --allow-downgrades" in log and "/0.deb" in log and "/1.deb" in log


def test_enroot_script_with_a_bad_checksum_installs_nothing(tmp_path):
    e = EnrootSpec(version="3.5.0", sha256={"enroot": "0" * 64, "enroot+caps": "0" * 64})
    proc = subprocess.run(["bash", "-c", enroot_install_script(e)], env=fake_tools(tmp_path, b"tampered"),
                          capture_output=True, text=True)
    assert proc.returncode == 1 and "enroot does not match nvidia.enroot.sha256; nothing installed" in proc.stderr
    assert "apt-get" not in (tmp_path / "log").read_text()


def test_enroot_script_without_a_sum_installs_nothing_and_skip_says_so(tmp_path):
    e = EnrootSpec(version="3.5.0", sha256={"enroot": hashlib.sha256(b"a deb").hexdigest()})
    proc = subprocess.run(["bash", "-c", enroot_install_script(e)], env=fake_tools(tmp_path, b"a deb"),
                          capture_output=True, text=True)
    assert proc.returncode == 1 and "no sha256 for enroot+caps in nvidia.enroot.sha256; nothing installed" in proc.stderr
    assert "apt-get" not in (tmp_path / "log").read_text()
    skip = subprocess.run(["bash", "-c", enroot_install_script(EnrootSpec(version="3.5.0", sha256="skip"))],
                          env=fake_tools(tmp_path / "skip", b"anything"), capture_output=True, text=True)
    assert skip.returncode == 0 and "enroot+caps installed unchecked (nvidia.enroot.sha256: skip)" in skip.stderr


def test_a_hostile_url_stays_one_word_in_the_script(tmp_path):
    e = EnrootSpec(version="3.5.0", sha256="skip",
                   url="https://example.com/{package}_{version}_{arch}.deb?a=1&b=2")
    script = enroot_install_script(e)
    assert "https://example.com/enroot_3.5.0_\"$arch\"'.deb?a=1&b=2'" in script, script
    proc = subprocess.run(["bash", "-c", script], env=fake_tools(tmp_path, b"x"), capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "curl https://example.com/enroot_3.5.0_arm64.deb?a=1&b=2" in (tmp_path / "log").read_text()


def test_pyxis_script_checks_the_source_before_building_and_records_the_slurm_it_used():
    script = pyxis_build_script(PyxisSpec(version="0.20.0", sha256="b" * 64))
    assert script.index("sha256sum -c") < script.index("make -C")
    assert "https://github.com/NVIDIA/pyxis/archive/refs/tags/v0.20.0.tar.gz" in script
    assert "printf 'pyxis %s slurm %s\\n' 0.20.0 \"$(dpkg-query -W -f='${Version}' libslurm-dev)\"" in script
    assert pyxis_mark(PyxisSpec(version="0.20.0"), "22.05.8-4") == "pyxis 0.20.0 slurm 22.05.8-4\n"


needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="chown to another user needs root")


@needs_root
def test_prolog_makes_private_dirs_and_epilog_removes_them_when_the_users_last_job_ends(tmp_path, monkeypatch):
    dirs = [{"path": str(tmp_path / "run/user-{uid}"), "clean": True},
            {"path": str(tmp_path / "cache/group-{gid}"), "clean": False, "shared": True}]
    tmp_path.chmod(0o755)
    assert jobdirs.prolog(dirs, 4242, 4343) == []
    run, cache = tmp_path / "run/user-4242", tmp_path / "cache/group-4343"
    assert (run.stat().st_uid, run.stat().st_gid, oct(run.stat().st_mode)[-3:]) == (4242, 4343, "700")
    assert (cache.stat().st_uid, cache.stat().st_gid, oct(cache.stat().st_mode)[-4:]) == (0, 4343, "2770")
    assert jobdirs.prolog(dirs, 4244, 4343) == []  # another member of the group: their own dir, the same cache
    assert (tmp_path / "run").stat().st_uid == 0 and oct((tmp_path / "run").stat().st_mode)[-3:] == "755"
    monkeypatch.setattr(jobdirs, "other_jobs", lambda node, uid, job: ["99"])
    assert jobdirs.epilog(dirs, 4242, 4343, "gpu01", "98") == [] and run.is_dir()  # another job still runs
    monkeypatch.setattr(jobdirs, "other_jobs", lambda node, uid, job: None)
    assert "kept" in jobdirs.epilog(dirs, 4242, 4343, "gpu01", "98")[0] and run.is_dir()  # Slurm unsure: keep
    monkeypatch.setattr(jobdirs, "other_jobs", lambda node, uid, job: [])
    assert jobdirs.epilog(dirs, 4242, 4343, "gpu01", "98") == []
    assert not run.exists() and cache.is_dir()


@needs_root
def test_planted_links_and_other_users_dirs_are_refused(tmp_path):
    tmp_path.chmod(0o755)
    victim = tmp_path / "victim"
    victim.mkdir()
    shared = tmp_path / "tmp"
    shared.mkdir()
    shared.chmod(0o1777)  # like /tmp
    (shared / "user-5001").symlink_to(victim)  # planted by another user
    errors = jobdirs.prolog([{"path": str(shared / "user-{uid}"), "clean": True}], 5001, 5001)
    assert errors and "not a directory of uid 5001" in errors[0] and victim.stat().st_uid == 0
    (shared / "enroot").symlink_to(victim)  # a planted parent
    errors = jobdirs.prolog([{"path": str(shared / "enroot/user-{uid}"), "clean": True}], 5001, 5001)
    assert errors and "not a plain directory" in errors[0] and not (victim / "user-5001").exists()
    open_dir = tmp_path / "open"
    open_dir.mkdir()
    open_dir.chmod(0o777)
    errors = jobdirs.prolog([{"path": str(open_dir / "user-{uid}"), "clean": True}], 5001, 5001)
    assert errors and "writable by everyone without the sticky bit" in errors[0]
    with pytest.raises(jobdirs.UnsafePath):
        jobdirs.remove_user_dir(str(shared / "user-5001"), 5001)
    assert victim.is_dir()


def test_url_templates_and_fixed_paths():
    assert "the URL may use only {version}, {package}, {arch}" in \
        problems("  enroot: {version: 3.5.0, url: 'https://mirror/{pkg}.deb'}\n")
    assert "the URL may use only {version}" in \
        problems("  enroot: {version: 3.5.0}\n  pyxis: {version: 0.20.0, url: 'https://mirror/{arch}.tgz'}\n")
    fixed = EnrootSpec(version="3.5.0", cache_path="/scratch/enroot-cache")  # the admin's own shared path
    assert [d["path"] for d in user_dirs(fixed)] == ["/run/enroot/user-{uid}", "/var/lib/enroot/data/user-{uid}"]


def test_with_pyxis_the_job_environment_is_a_spank_plugin_and_slurm_names_no_task_prolog():
    """From Slurm 24.11 a TaskProlog runs through slurmstepd's own binary inside pyxis' container (status 127
    without its loader and libslurmfull.so there): with pyxis, corral's plugin goes first in plugstack.conf
    and slurm.conf has no TaskProlog; without pyxis the TaskProlog stays."""
    from corral.render import spank_env
    from corral.render.job_env import PATH as JOB_ENV
    from corral.render.slurm import render_slurm_conf
    p = PyxisSpec(version="0.20.0", args={"runtime_path": "/run/pyxis"})
    lines = [line for line in plugstack_conf(p).splitlines() if not line.startswith("#")]
    assert lines == [f"required {spank_env.SO}", f"required {PYXIS_SO} runtime_path=/run/pyxis"]
    with_pyxis = load_text(SPEC + "  enroot: {version: 3.5.0, sha256: skip}\n  pyxis: {version: 0.20.0, sha256: skip}\n",
                           "cluster.yaml")
    without = load_text(SPEC.replace("nvidia:\n", ""), "cluster.yaml")
    assert "TaskProlog=" not in render_slurm_conf(with_pyxis, {}) and "Prolog=" in render_slurm_conf(with_pyxis, {})
    assert "TaskProlog=/usr/local/sbin/corral-task-prolog" in render_slurm_conf(without, {})
    assert f'fopen("{JOB_ENV}", "r")' in spank_env.SOURCE and "@" not in spank_env.SOURCE
    assert "slurm_spank_user_init" in spank_env.SOURCE and "ESPANK_ENV_NOEXIST" in spank_env.SOURCE
    assert spank_env.mark("24.11.5-4") != spank_env.mark("22.05.8-4")  # a Slurm upgrade rebuilds it

