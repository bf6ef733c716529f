"""The one way corral unpacks a tar on the control host (tests/unit/test_untar.py: nothing else in src/corral
calls extract/extractall/unpack_archive). Every member is checked before anything is written, by name and
type alone (no realpath of what is on disk, which is where tarfile's own filters have had their gaps):

- a name is relative, normalised (no `..`, `.`, `//`, trailing or leading `/`), and appears once (a
  backslash is an ordinary character here: systemd's unit names hold `\x2d`);
- no member lies under a symlink or hard link member, nor under a member that is not a directory, in
  whatever order they come: nothing is ever written *through* a link of the archive;
- `files`: regular files and directories only; `rootfs`: also symlinks (their targets are the image's own
  business: resolved inside the node, never followed here), hard links to an earlier regular file, and
  device nodes and fifos under dev/ only.

The destination must be a new, empty directory: what is on disk before holds no link either. A refused
archive leaves it empty.
"""

from __future__ import annotations

import tarfile
from collections import Counter
from pathlib import Path, PurePosixPath

from corral.errors import CorralError

SPECIALS_UNDER = ("dev",)  # where a root file system keeps its device nodes


def clean_name(name: str) -> bool:
    p = PurePosixPath(name)
    return (bool(name) and "\0" not in name and not p.is_absolute()
            and p.as_posix() == name and ".." not in p.parts and "." not in name.split("/"))


def _kind(m: tarfile.TarInfo) -> str:
    return ("file" if m.isfile() else "directory" if m.isdir() else "symlink" if m.issym() else "hard link"
            if m.islnk() else "device node" if m.ischr() or m.isblk() else "fifo" if m.isfifo() else "member")


def problems(members: list[tarfile.TarInfo], *, rootfs: bool = False) -> list[str]:
    """Why these members cannot be unpacked safely ([]: they can)."""
    out: list[str] = []
    count = Counter(m.name for m in members)
    by_name = {m.name: m for m in members}
    links = {m.name for m in members if m.issym() or m.islnk()}
    seen_files: set[str] = set()
    for m in members:
        name, kind = m.name, _kind(m)
        if name == "." and m.isdir():  # the root itself (pack_image adds it): its mode and owner
            continue
        if not clean_name(name):
            out.append(f"{name!r}: not a clean relative name (refused)")
            continue
        if count[name] > 1:
            out.append(f"{name}: appears {count[name]} times (a later copy would replace the one checked; refused)")
        parents = [p.as_posix() for p in PurePosixPath(name).parents][:-1]
        through = next((p for p in parents if p in links), None)
        if through is not None:
            out.append(f"{name}: would be written through the link {through} (refused)")
        elif any(p in by_name and not by_name[p].isdir() for p in parents):
            out.append(f"{name}: lies under a member that is not a directory (refused)")
        allowed = m.isfile() or m.isdir() or (rootfs and (m.issym() or m.islnk() or (
            (m.ischr() or m.isblk() or m.isfifo()) and name.split("/")[0] in SPECIALS_UNDER)))
        if not allowed:
            out.append(f"{name}: a {kind}{' outside dev/' if rootfs and kind in ('device node', 'fifo') else ''} "
                       "(refused)")
        elif m.islnk() and m.linkname not in seen_files:
            out.append(f"{name}: a hard link to {m.linkname!r}, which is no earlier regular file of the archive "
                       "(refused)")
        if m.isfile():
            seen_files.add(name)
    return out


def unpack(path: Path, dest: Path, *, rootfs: bool = False) -> None:
    """Unpack the tar at `path` into `dest` (created; must be new or empty) after checking every member;
    `rootfs`: a root file system (owners by number, modes with setuid, links, device nodes kept). A refused
    archive raises CorralError naming its members, with nothing written."""
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    if any(dest.iterdir()):
        raise CorralError(f"{dest} is not empty: an archive is unpacked into a new directory only", value=str(dest))
    with tarfile.open(path, "r:") as tar:
        members = tar.getmembers()  # read once: the names checked are the ones extracted
        bad = problems(members, rootfs=rootfs)
        if bad:
            raise CorralError(f"{Path(path).name}: unsafe archive, nothing unpacked: " + "; ".join(bad[:3])
                              + (f" (and {len(bad) - 3} more)" if len(bad) > 3 else ""), value=str(path),
                              fix="build it again with `corral bundle build`; this file was not written by it")
        # checked above by name and type; "fully_trusted" keeps a root file system's owners, modes and links
        tar.extractall(dest, members=members, numeric_owner=rootfs,
                       filter="fully_trusted" if rootfs else "data")
