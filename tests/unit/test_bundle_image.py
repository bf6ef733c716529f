"""--with-virtual: the virtual cluster's base image carried in a bundle (bundle/build.pack_image) and
unpacked from it on a host with no image (virtual/image.import_image): owners, modes (setuid too),
symlinks and hard links as they were; unsafe names, a member written through a link of the archive, and a
tar that is not a base image are refused with nothing written (the hostile-tar fuzz: test_untar.py)."""

from __future__ import annotations

import io
import os
import tarfile

import pytest

from corral.bundle.build import pack_image
from corral.errors import CorralError, HostToolError
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
    with pytest.raises(CorralError, match=r"unsafe archive, nothing unpacked: '\.\./escape': not a clean relative"):
        import_image(bad, tmp_path / "t1")
    assert not (tmp_path / "t1").exists() and not (tmp_path / "escape").exists()
    plain = tmp_path / "plain.tar"
    _tar(plain, [("etc/hostname", b"x")])
    with pytest.raises(HostToolError, match="not a corral node base image"):
        import_image(plain, tmp_path / "t2")
    assert not (tmp_path / "t2").exists() and not (tmp_path / "t2.building").exists()


def _hostile(path, outside):
    """`etc` -> a directory outside the image (absolute), then a file through it: root would write there."""
    with tarfile.open(path, "w") as tar:
        link = tarfile.TarInfo("etc")
        link.type, link.linkname = tarfile.SYMTYPE, str(outside)
        tar.addfile(link)
        for name, data in (("etc/cron.d/x", b"* * * * * root evil\n"), ("etc/corral-image", b"{}")):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))


def test_a_member_written_through_a_symlink_of_the_image_is_refused(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    _hostile(tmp_path / "hostile.tar", outside)
    with pytest.raises(CorralError, match="etc/cron.d/x: would be written through the link etc"):
        import_image(tmp_path / "hostile.tar", tmp_path / "cache" / "img")
    assert list(outside.iterdir()) == []
    assert not (tmp_path / "cache" / "img").exists() and not (tmp_path / "cache" / "img.building").exists()


@pytest.mark.skipif(os.geteuid() != 0, reason="device nodes are made as root only")
def test_links_and_device_nodes_an_image_has_are_kept_and_no_more(tmp_path, fake_image):
    (fake_image / "bin").symlink_to("usr/bin")  # merged /usr: links every Debian image has
    (fake_image / "dev").mkdir()
    os.mknod(fake_image / "dev/null", 0o666 | 0o020000, os.makedev(1, 3))
    entry = pack_image(fake_image, tmp_path / "bundle")
    target = tmp_path / "cache" / "img"
    import_image(tmp_path / "bundle" / entry["file"], target)
    assert os.readlink(target / "bin") == "usr/bin" and (target / "dev/null").is_char_device()
    evil = tmp_path / "evil.tar"
    with tarfile.open(tmp_path / "bundle" / entry["file"]) as src, tarfile.open(evil, "w") as tar:
        for m in src.getmembers():
            tar.addfile(m, src.extractfile(m) if m.isfile() else None)
        dev = tarfile.TarInfo("etc/sda")
        dev.type, dev.devmajor, dev.devminor = tarfile.BLKTYPE, 8, 0
        tar.addfile(dev)
    with pytest.raises(CorralError, match="etc/sda: a device node outside dev/"):
        import_image(evil, tmp_path / "cache" / "img2")
    assert not (tmp_path / "cache" / "img2").exists()
