"""Every tar corral unpacks on the control host goes through bundle/untar.py (a scan of src/corral), and
that helper, fed hostile archives (generated: links then members through them, in either order, hard links
out, absolute and `..` names, duplicates, device nodes, names that alias), refuses each with nothing
written inside or outside its destination, while what a root file system legitimately holds unpacks."""

from __future__ import annotations

import ast
import io
import os
import random
import tarfile
from pathlib import Path

import pytest

from corral.bundle.untar import problems, unpack
from corral.errors import CorralError

SRC = Path(__file__).resolve().parents[2] / "src" / "corral"
HELPER = SRC / "bundle" / "untar.py"
EXTRACTORS = {"extractall", "extract", "unpack_archive", "_extract_member"}


def test_every_extraction_goes_through_the_one_helper():
    found = []
    for path in sorted(SRC.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            name = (node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", None)) \
                if isinstance(node, ast.Call) else None
            if name in EXTRACTORS and path != HELPER:
                found.append(f"{path.relative_to(SRC)}:{node.lineno}: {name}(...)")
    assert not found, "unpack through corral.bundle.untar.unpack (it checks every member first):\n" + "\n".join(found)


def _member(name, kind="file", target="", data=b"x"):
    info = tarfile.TarInfo(name)
    if kind == "file":
        info.size = len(data)
        return info, io.BytesIO(data)
    info.type = {"dir": tarfile.DIRTYPE, "sym": tarfile.SYMTYPE, "hard": tarfile.LNKTYPE,
                 "chr": tarfile.CHRTYPE, "fifo": tarfile.FIFOTYPE}[kind]
    info.linkname, info.mode = target, 0o755 if kind == "dir" else 0o644
    if kind == "chr":
        info.devmajor, info.devminor = 1, 3
    return info, None


def _write(path, members):
    with tarfile.open(path, "w", format=tarfile.GNU_FORMAT) as tar:
        for args in members:
            tar.addfile(*_member(*args))


def _hostile(rng: random.Random, outside: Path) -> list[tuple]:
    """One hostile archive: benign members around one or two attacks, in a random order."""
    benign = [("usr", "dir"), ("usr/bin", "dir"), ("usr/bin/tool", "file"), ("bin", "sym", "usr/bin"),
              ("etc", "dir"), ("etc/alternatives", "dir"), ("etc/alternatives/x", "sym", "/usr/bin/tool")]
    attacks = [
        [("a", "sym", str(outside)), ("a/planted", "file")],
        [("a/planted", "file"), ("a", "sym", str(outside))],                    # the member before its link
        [("a", "sym", "../" * 8 + str(outside).lstrip("/")), ("a/b", "dir"), ("a/b/planted", "file")],
        [("etc2", "sym", "usr"), ("etc2/bin/planted", "file")],                  # a link inside, still refused
        [("h", "hard", str(outside / "victim"))],
        [("h", "hard", "../outside/victim")],
        [("h", "hard", "bin")],                                                 # a hard link to a symlink
        [("h", "hard", "later"), ("later", "file")],
        [(str(outside / "planted"), "file")],
        [("../outside/planted", "file")],
        [("usr/../../outside/planted", "file")],
        [("./usr/./x", "file")],
        [("usr//x", "file")],
        [("dup", "file", "", b"checked"), ("dup", "file", "", b"shadow")],
        [("d", "dir"), ("d", "sym", str(outside)), ("d/planted", "file")],
        [("f", "file"), ("f/planted", "file")],
        [("etc/null", "chr")],
        [("tmp/fifo", "fifo")],
    ]
    chosen = [m for attack in rng.sample(attacks, rng.choice([1, 2])) for m in attack]
    ordered = list(benign)
    rng.shuffle(ordered)
    at = sorted(rng.randrange(len(ordered) + 1) for _ in chosen)  # the attack's own order kept: it can matter
    for offset, (i, m) in enumerate(zip(at, chosen)):
        ordered.insert(i + offset, m)
    return ordered


@pytest.mark.parametrize("seed", range(60))
@pytest.mark.attack
def test_hostile_archives_are_refused_with_nothing_written(tmp_path, seed):
    rng = random.Random(seed)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "victim").write_text("host file\n")
    members = _hostile(rng, outside)
    _write(tmp_path / "hostile.tar", members)
    dest = tmp_path / "dest"
    for rootfs in (True, False):
        with pytest.raises(CorralError, match="unsafe archive, nothing unpacked"):
            unpack(tmp_path / "hostile.tar", dest, rootfs=rootfs)
        assert sorted(p.name for p in outside.iterdir()) == ["victim"], members
        assert (outside / "victim").read_text() == "host file\n" and list(dest.iterdir()) == []


@pytest.mark.skipif(os.geteuid() != 0, reason="device nodes and owners are made as root only")
def test_a_root_file_system_unpacks_as_it_was(tmp_path):
    members = [(".", "dir"), ("usr", "dir"), ("usr/bin", "dir"), ("usr/bin/tool", "file", "", b"#!/bin/sh\n"),
               ("bin", "sym", "usr/bin"), ("etc", "dir"), ("etc/alternatives", "dir"),
               ("etc/alternatives/x", "sym", "/usr/bin/tool"), ("usr/bin/tool2", "hard", "usr/bin/tool"),
               ("dev", "dir"), ("dev/null", "chr"), ("dev/initctl", "fifo"),
               ("usr/lib", "dir"), ("usr/lib/system-systemd\\x2dcryptsetup.slice", "file")]  # as systemd names them
    _write(tmp_path / "root.tar", members)
    assert problems(tarfile.open(tmp_path / "root.tar").getmembers(), rootfs=True) == []
    unpack(tmp_path / "root.tar", tmp_path / "dest", rootfs=True)
    d = tmp_path / "dest"
    assert os.readlink(d / "bin") == "usr/bin" and os.readlink(d / "etc/alternatives/x") == "/usr/bin/tool"
    assert (d / "usr/bin/tool2").stat().st_ino == (d / "usr/bin/tool").stat().st_ino
    assert (d / "dev/null").is_char_device() and (d / "dev/initctl").is_fifo()
    assert (d / "usr/lib/system-systemd\\x2dcryptsetup.slice").is_file()
    with pytest.raises(CorralError, match="bin: a symlink"):  # a plain-file archive holds no links or devices
        unpack(tmp_path / "root.tar", tmp_path / "plain")
    with pytest.raises(CorralError, match="is not empty"):
        unpack(tmp_path / "root.tar", d, rootfs=True)
