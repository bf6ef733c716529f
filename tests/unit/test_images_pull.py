"""`corral images pull/list/rm` (workflows/images_*.py): the directory refused unless every login and
compute node mounts it; the real scripts run with bash against stand-in programs (tests/unit/images_fakes.py):
the image and its manifest placed atomically, list's sha256 check (a mismatch shown), rm refused while a
job names the image; every failure, timeout and Ctrl-C cancels the job and leaves no partial file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from corral.errors import UsageError
from corral.virtual.defaults import default_spec
from corral.workflows import images_run
from corral.workflows.images_place import check_name, image_dir
from tests.unit.images_fakes import DIGEST, LocalRun
from tests.unit.test_render_slurm_files import KEY, _cluster

REF = "ctl:5000/site/tool:1"


def _left(d: Path) -> list[str]:
    """What is in the images directory and its staging directory, the staging directory itself aside."""
    return sorted(str(p.relative_to(d)) for p in d.rglob("*") if p.name != ".incoming")


def _spec(tmp_path: Path, extra: str = "software: {root: /home/sw}\n", podman: bool = True) -> object:
    """The virtual cluster's spec, with a shared mount at tmp_path/images standing in for /sw/images (its
    export the same directory: the scripts run here see one tree)."""
    home = "    - {path: /home, export: /srv/nfs/home, roles: [controller, compute, login]}\n"
    text = default_spec(user_key=KEY).replace(home, home + f"    - {{path: {tmp_path}/images, export: {tmp_path}/images, "
                                                           "roles: [compute, login]}\n")
    text = text.replace("    - {path: /srv/nfs/home}\n", f"    - {{path: /srv/nfs/home}}\n    - {{path: {tmp_path}/images}}\n")
    assert text != default_spec(user_key=KEY)
    return _cluster(tmp_path, text + extra + f"images: {{podman: {str(podman).lower()}}}\n")


def test_the_directory_is_shared_by_every_login_and_compute_node(tmp_path):
    cluster = _spec(tmp_path)
    assert image_dir(cluster, None) == "/home/sw/images"
    assert image_dir(cluster, "/home/x/../imgs/") == "/home/imgs"
    for bad, part in (("/opt/images", "no shared mount"), ("relative", "absolute"), ("/home/a b", "absolute"),
                      ("/home/$(id)", "absolute"), ("/", "absolute"), ("/home/.hidden", "dot-names")):
        with pytest.raises(UsageError, match=part.replace("$", r"\$")):
            image_dir(cluster, bad)
    with pytest.raises(UsageError, match="--to is needed"):
        image_dir(_spec(tmp_path / "b", extra=""), None)


def test_a_mount_the_login_node_lacks_is_refused(tmp_path):
    text = default_spec(user_key=KEY).replace("roles: [controller, compute, login]}",
                                              "roles: [controller, compute]}")
    cluster = _cluster(tmp_path, text)
    with pytest.raises(UsageError, match="login1 do not mount /home"):
        image_dir(cluster, "/home/images")


@pytest.mark.parametrize("name", ["../x", "x.sqsh", "a b", "-x", ".x", "x;id", ""])
def test_image_names_are_checked(name):
    with pytest.raises(UsageError):
        check_name(name)


def _pull(tmp_path, **env):
    cluster = _spec(tmp_path)
    d = tmp_path / "images"
    run = LocalRun(tmp_path, **env)
    return cluster, d, run, images_run.pull(cluster, REF, str(d), wait=30, run=run)


def test_pull_places_the_image_and_its_manifest_then_list_and_rm(tmp_path):
    cluster, d, run, r = _pull(tmp_path)
    assert r["ok"], r
    assert r["name"] == "site+tool+1" and r["path"] == f"{d}/site+tool+1.sqsh" and r["job"] == "42"
    assert sorted(p.name for p in d.iterdir()) == [".incoming", "site+tool+1.json", "site+tool+1.sqsh"]
    assert list((d / ".incoming").iterdir()) == []  # no partial file, no log, no manifest's temporary
    assert (d / ".incoming").stat().st_uid == 65534 and oct((d / ".incoming").stat().st_mode)[-3:] == "700"
    assert (d / "site+tool+1.sqsh").stat().st_uid == 0
    m = json.loads((d / "site+tool+1.json").read_text())
    assert m["ref"] == REF and m["digest"] == DIGEST and m["size"] == (d / "site+tool+1.sqsh").stat().st_size
    assert "sbatch -J corral-image-pull-" in run.log.read_text() and REF in run.log.read_text()
    listed = images_run.list_images(cluster, str(d), run=run)
    assert listed["ok"] and [(i["name"], i["digest"], i["size"], i["problem"]) for i in listed["images"]] == [
        ("site+tool+1", DIGEST, m["size"], None)]
    again = images_run.pull(cluster, REF, str(d), wait=30, run=run)
    assert not again["ok"] and "already there" in again["error"]
    assert images_run.rm(cluster, "site+tool+1", str(d), run=run)["ok"]
    assert _left(d) == [] and images_run.list_images(cluster, str(d), run=run)["images"] == []


def test_list_shows_a_changed_file_and_an_image_without_manifest(tmp_path):
    cluster, d, run, r = _pull(tmp_path)
    with open(d / "site+tool+1.sqsh", "ab") as f:
        f.write(b"x")
    (d / "other.sqsh").write_bytes(b"y")
    listed = images_run.list_images(cluster, str(d), run=run)
    assert not listed["ok"] and "other, site+tool+1" in listed["error"]
    problems = {i["name"]: i["problem"] for i in listed["images"]}
    assert "sha256 mismatch" in problems["site+tool+1"] and "no manifest" in problems["other"]


def test_rm_refuses_an_image_a_job_names(tmp_path):
    cluster, d, run, r = _pull(tmp_path)
    path = f"{d}/site+tool+1.sqsh"
    run.env["FAKE_SQUEUE"] = f"7|alice|srun --container-image={path} cat|\n"
    got = images_run.rm(cluster, "site+tool+1", str(d), run=run)
    assert not got["ok"] and got["used_by"] == ["7|alice"]
    run.env.update(FAKE_SQUEUE="8|bob|/home/bob/job.sh|\n", FAKE_SCRIPT_JOB="8",
                   FAKE_SCRIPT=f"#!/bin/sh\nsrun --container-image={path} true")
    got = images_run.rm(cluster, "site+tool+1", str(d), run=run)
    assert not got["ok"] and got["used_by"] == ["8|script"] and (d / "site+tool+1.sqsh").exists()
    assert "no image" in images_run.rm(cluster, "nothing", str(d), run=run)["error"]


def test_a_failed_pull_leaves_nothing_and_says_why(tmp_path):
    cluster, d, run, r = _pull(tmp_path, FAKE_PULL_FAIL="1")
    assert not r["ok"] and "podman pull: manifest unknown" in r["error"]
    assert _left(d) == [] and list((d / ".incoming").iterdir()) == []
    assert "scancel -n corral-image-pull-" in run.log.read_text()


def test_a_timeout_cancels_the_job_and_removes_the_partial_file(tmp_path):
    cluster = _spec(tmp_path)
    d = tmp_path / "images"
    run = LocalRun(tmp_path, FAKE_SLEEP="5")
    r = images_run.pull(cluster, REF, str(d), wait=1, run=run)
    assert not r["ok"]
    assert "scancel -n corral-image-pull-" in run.log.read_text()
    assert _left(d) == [] and list((d / ".incoming").iterdir()) == []


def test_ctrl_c_cancels_the_job_and_removes_the_partial_file(tmp_path):
    cluster = _spec(tmp_path)
    d = tmp_path / "images"
    real = LocalRun(tmp_path)

    def interrupted(cluster, node, command, **kw):
        if "sbatch" in command:
            (d / ".incoming" / f"{command.split('-J ')[1].split()[0]}.sqsh").write_bytes(b"partial")
            raise KeyboardInterrupt
        return real(cluster, node, command, **kw)
    with pytest.raises(KeyboardInterrupt):
        images_run.pull(cluster, REF, str(d), wait=30, run=interrupted)
    assert "scancel -n corral-image-pull-" in real.log.read_text()
    assert _left(d) == [] and list((d / ".incoming").iterdir()) == []


@pytest.mark.parametrize("ref", ["ctl:5000/x;touch /tmp/pwned", "ctl:5000/X", "$(id)", "a b"])
def test_a_hostile_reference_is_refused_before_any_node_is_reached(tmp_path, ref):
    cluster = _spec(tmp_path)
    calls = []
    with pytest.raises(UsageError, match="image reference"):
        images_run.pull(cluster, ref, None, run=lambda *a, **k: calls.append(a))
    assert calls == []


def test_the_staging_owner_follows_the_exports_anonuid(tmp_path):
    from corral.workflows.images_place import squashed_owner, writer
    cluster = _spec(tmp_path)
    assert writer(cluster, f"{tmp_path}/images/x") == ("ctl", f"{tmp_path}/images/x")
    assert writer(cluster, "/home/imgs") == ("ctl", "/srv/nfs/home/imgs")  # the export, where root is root
    assert squashed_owner(cluster, f"{tmp_path}/images") == "65534:65534"


def test_pull_needs_podman(tmp_path):
    with pytest.raises(UsageError, match="images.podman"):
        images_run.pull(_spec(tmp_path, podman=False), REF, None, run=lambda *a, **k: None)


def test_the_cli_refuses_a_hostile_reference_with_its_json_object_and_exit_2(tmp_path):
    import os
    import subprocess
    import sys
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2] / "src"), "CORRAL_SPEC": str(tmp_path / "none")}
    done = subprocess.run([sys.executable, "-m", "corral", "images", "pull", "ctl:5000/x;touch /tmp/p", "--json"],
                          capture_output=True, text=True, env=env, cwd=tmp_path, timeout=60)
    assert done.returncode == 2, done.stderr
    got = json.loads(done.stdout)
    assert got["ok"] is False and "';'" in got["error"] and "' '" in got["error"]
    assert "images" in subprocess.run([sys.executable, "-m", "corral", "--help"], capture_output=True, text=True,
                                      env=env, timeout=60).stdout
