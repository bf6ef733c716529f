"""--with-virtual: the virtual cluster's base image carried in a bundle (bundle/build.pack_image) and
unpacked from it on a host with no image (virtual/image.import_image): owners, modes (setuid too),
symlinks and hard links as they were; unsafe names and a tar that is not a base image are refused."""

from __future__ import annotations

import io
import os
import tarfile

import pytest

from corral.bundle.build import pack_image
from corral.errors import HostToolError
from corral.virtual.image import import_image


@pytest.fixture
def fake_image(tmp_path):
    img = tmp_path / "images" / "bookworm-abc"
    (img / "etc").mkdir(parents=True)
    (img / "usr/bin").mkdir(parents=True)
    (img / "etc/corral-image").write_text('{"suite": "bookworm", "version": 4}\n')
    (img / "usr/bin/sudo").write_text("#!/bin/sh\n")
    os.chown(img / "usr/bin/sudo", 0, 0)  # before the mode: chown clears setuid
    os.chmod(img / "usr/bin/sudo", 0o4755)
    (img / "etc/owned").write_text("x")
    os.chown(img / "etc/owned", 1234, 4321)
    (img / "etc/alternatives").symlink_to("/usr/bin/sudo")
    os.link(img / "etc/owned", img / "etc/hardlinked")
    return img


@pytest.mark.skipif(os.geteuid() != 0, reason="owners are kept as root only")
def test_the_image_is_carried_and_unpacked_as_it_was(tmp_path, fake_image):
    entry = pack_image(fake_image, tmp_path / "bundle")
    assert entry["image"] == "bookworm-abc" and entry["file"] == "virtual/bookworm-abc.tar"
    assert entry["recipe"] == {"suite": "bookworm", "version": 4} and len(entry["sha256"]) == 64
    target = tmp_path / "cache" / "bookworm-abc"
    target.parent.mkdir()
    assert import_image(tmp_path / "bundle" / entry["file"], target) == target
    assert (target / "usr/bin/sudo").stat().st_mode & 0o7777 == 0o4755
    owned = (target / "etc/owned").stat()
    assert (owned.st_uid, owned.st_gid) == (1234, 4321) and owned.st_ino == (target / "etc/hardlinked").stat().st_ino
    assert os.readlink(target / "etc/alternatives") == "/usr/bin/sudo"
    assert not (tmp_path / "cache" / "bookworm-abc.building").exists()


def _tar(path, members):
    with tarfile.open(path, "w") as tar:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))


def test_unsafe_names_and_a_tar_that_is_no_base_image_are_refused(tmp_path):
    bad = tmp_path / "bad.tar"
    _tar(bad, [("etc/corral-image", b"{}"), ("../escape", b"x")])
    with pytest.raises(HostToolError, match=r"unsafe names: \.\./escape"):
        import_image(bad, tmp_path / "t1")
    assert not (tmp_path / "t1").exists() and not (tmp_path / "escape").exists()
    plain = tmp_path / "plain.tar"
    _tar(plain, [("etc/hostname", b"x")])
    with pytest.raises(HostToolError, match="not a corral node base image"):
        import_image(plain, tmp_path / "t2")
    assert not (tmp_path / "t2").exists() and not (tmp_path / "t2.building").exists()
