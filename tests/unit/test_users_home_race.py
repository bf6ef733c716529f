"""Homes made without a race (security issue, finding 5): the home used to be made the user's before
/etc/skel was copied into it as root, so the user could plant a symlink (.bashrc -> /etc/shadow) in the
window and have root write through it. Now root fills a root-only directory, gives the contents away
without following links, and gives the directory away last. Run for real (as root) with a stand-in
`install` that plays the user: it plants a symlink the moment the new home is theirs."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from corral.deploy.users import home_script

pytestmark = pytest.mark.skipif(os.geteuid() != 0 or not Path("/etc/skel/.bashrc").is_file(),
                                reason="needs root (chown) and /etc/skel/.bashrc")
UID = GID = 54321
ATTACKER = """#!/bin/sh
/usr/bin/install "$@" || exit
for last; do :; done
# the user can write into the new home only if it is theirs already
if [ "$(stat -c %u "$last")" = "{uid}" ]; then ln -s {victim} "$last/.bashrc"; fi
"""


def _run(script: str, shim: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PATH": f"{shim}:{os.environ['PATH']}"}
    return subprocess.run(["sh", "-c", script], env=env, capture_output=True, text=True, timeout=30)


def test_a_symlink_planted_while_the_home_is_made_is_not_written_through(tmp_path):
    victim = tmp_path / "shadow"
    victim.write_text("root:secret\n")
    shim = tmp_path / "bin"
    shim.mkdir()
    (shim / "install").write_text(ATTACKER.format(uid=UID, victim=victim))
    (shim / "install").chmod(0o755)
    home = tmp_path / "homes" / "eve"
    home.parent.mkdir()
    proc = _run(home_script(str(home), UID, GID), shim)
    assert victim.read_text() == "root:secret\n", proc
    assert proc.returncode == 0, proc.stderr
    st = home.stat()
    assert (st.st_uid, st.st_gid, oct(st.st_mode & 0o777)) == (UID, GID, "0o700")
    bashrc = home / ".bashrc"
    assert not bashrc.is_symlink() and bashrc.lstat().st_uid == UID
    assert bashrc.read_text() == Path("/etc/skel/.bashrc").read_text()


def test_a_symlink_where_the_home_would_be_is_left_alone(tmp_path):
    victim = tmp_path / "etc"
    victim.mkdir()
    home = tmp_path / "eve"
    home.symlink_to(victim)
    proc = _run(home_script(str(home), UID, GID), tmp_path)
    assert proc.returncode == 0 and "exists" in proc.stdout, proc
    assert victim.stat().st_uid == 0 and not list(victim.iterdir())


def test_every_file_made_is_the_users_and_no_link_was_followed(tmp_path):
    """The class: after the script, nothing under the home is root's, and nothing outside it changed owner."""
    outside = tmp_path / "outside"
    outside.write_text("x")
    home = tmp_path / "homes" / "eve"
    home.parent.mkdir()
    proc = _run(home_script(str(home), UID, GID), tmp_path)
    assert proc.returncode == 0, proc.stderr
    owners = {p.lstat().st_uid for p in [home, *home.rglob("*")]}
    assert owners == {UID} and outside.stat().st_uid == 0
