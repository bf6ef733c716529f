"""corral's own state dir in a backup: the secrets (munge key, DB passwords), the pinned host keys,
the SSH keys corral made, the hardware facts cache, the record of deployed nodes and the journal. Not
the virtual cluster's runtime files, logs, the emulated NAS or the backups themselves.

Restoring puts back what is missing and never overwrites: a file that differs from the backup's
is kept and reported (the nodes use the current one; replacing it is the admin's decision). What it
may write is an allow-list: the records (RECORDS) always; trust material (TRUST: the secrets, the
pinned host keys, corral's SSH keys, the bundle signing key) only when asked (`--restore-trust`),
each file listed. The backup key (backup/auth.py) is never packed and never written.
"""

from __future__ import annotations

import io
import os
import sqlite3
import tarfile
import tempfile
from contextlib import closing
from pathlib import Path, PurePosixPath

from corral.backup.auth import KEY_FILE
from corral.engine.hostkeys import KNOWN_HOSTS
from corral.engine.journal import FILE as JOURNAL
from corral.engine.node_record import RECORD
from corral.errors import CorralError
from corral.facts.slurm import HW_CACHE

DIRS = ("secrets", "ssh")                      # trust material, whole directories
FILES = (KNOWN_HOSTS, HW_CACHE, RECORD)
RECORDS = (HW_CACHE, RECORD, JOURNAL)           # restored when missing: records, they grant nothing
TRUST_FILES = (KNOWN_HOSTS,)                    # with DIRS: restored only when asked


def kind(name: str) -> str | None:
    """"record", "trust", or None: a name restore never writes (the backup key, anything else)."""
    p = PurePosixPath(name)
    if p.is_absolute() or ".." in p.parts or not p.parts or name == KEY_FILE or p.as_posix() != name:
        return None
    if name in RECORDS:
        return "record"
    if name in TRUST_FILES or (len(p.parts) > 1 and p.parts[0] in DIRS):
        return "trust"
    return None


def _members(state_dir: Path) -> list[Path]:
    found = [state_dir / f for f in FILES if (state_dir / f).is_file()]
    for d in DIRS:
        if (state_dir / d).is_dir():
            found += sorted(p for p in (state_dir / d).rglob("*") if p.is_file() and not p.is_symlink())
    return [p for p in found if p.relative_to(state_dir).as_posix() != KEY_FILE]  # the key stays out


def _journal_copy(path: Path) -> bytes:
    """A consistent copy of the SQLite journal (the backup API, not a byte copy of a live file)."""
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / "j.sqlite"
        with closing(sqlite3.connect(path, timeout=10)) as src, closing(sqlite3.connect(copy)) as dst:
            src.backup(dst)
        return copy.read_bytes()


def pack_state(state_dir: Path, dest: Path) -> list[str]:
    """Write the state dir's kept files to the tar.gz `dest`; returns their relative names."""
    state_dir = Path(state_dir)
    names = []
    fd = os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f, tarfile.open(fileobj=f, mode="w:gz") as tar:
        for p in _members(state_dir):
            rel = p.relative_to(state_dir).as_posix()
            tar.add(p, arcname=rel, recursive=False)
            names.append(rel)
        if (state_dir / JOURNAL).is_file():
            data = _journal_copy(state_dir / JOURNAL)
            info = tarfile.TarInfo(JOURNAL)
            info.size, info.mode = len(data), 0o600
            tar.addfile(info, io.BytesIO(data))
            names.append(JOURNAL)
    return names


def compare_state(archive: Path, state_dir: Path) -> tuple[list[str], list[str], list[str]]:
    """(missing here, differing from the backup, the same) for each file in the backup."""
    missing, differ, same = [], [], []
    with tarfile.open(archive, mode="r:gz") as tar:
        seen = set()
        for m in tar.getmembers():
            if not (m.isfile() and kind(m.name)) or m.name in seen:
                continue
            seen.add(m.name)
            here = Path(state_dir) / m.name
            if not here.is_file():
                missing.append(m.name)
            elif m.name == JOURNAL:
                same.append(m.name)  # the journal grows; the current one is kept, never compared
            elif here.read_bytes() != tar.extractfile(m).read():
                differ.append(m.name)
            else:
                same.append(m.name)
    return missing, differ, same


def restore_missing(archive: Path, state_dir: Path, trust: bool = False) -> tuple[list[str], list[str]]:
    """Write back the backup's records the state dir lacks, and its trust material only when `trust`
    (files 0600, dirs 0700, never through a link). Returns (written, missing trust files not written)."""
    missing, _, _ = compare_state(archive, state_dir)
    written = [n for n in missing if kind(n) == "record" or trust]
    todo = set(written)
    with tarfile.open(archive, mode="r:gz") as tar:
        for m in tar.getmembers():
            if m.name not in todo or not m.isfile():
                continue
            todo.discard(m.name)  # the first of duplicate names, as compare_state read it
            dest = Path(state_dir) / m.name
            try:
                Path(state_dir).mkdir(mode=0o700, parents=True, exist_ok=True)  # a rebuilt host may have none
                for parent in reversed(dest.relative_to(state_dir).parents[:-1]):
                    (Path(state_dir) / parent).mkdir(mode=0o700, exist_ok=True)
                fd = os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
            except OSError as exc:  # a link or a non-directory where the backup has a file
                raise CorralError(f"cannot restore {m.name} into the state dir: {exc.strerror}", where=str(dest),
                                  fix="move what is at that path away, then restore again") from None
            with os.fdopen(fd, "wb") as f:
                f.write(tar.extractfile(m).read())
    return written, [n for n in missing if n not in written]
