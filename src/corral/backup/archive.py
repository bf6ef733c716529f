"""The backup file: one uncompressed tar holding manifest.json, its authentication (manifest.hmac:
backup/auth.py, under a key kept outside every backup) and the compressed parts the manifest lists,
each with its size and sha256. Pure: packs, verifies and unpacks; knows nothing of nodes.

A file is accepted only authentic and whole: the manifest's MAC checks under the key, every part it
lists is there with its checksum, nothing else is, and it names the cluster it is restored onto.
Anything else is refused with what is wrong, before anything is changed (and before any part is read).
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import tarfile
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from corral.backup import auth
from corral.digest import sha256_file
from corral.errors import CorralError

FORMAT = 2                               # 1: before backups were authenticated
MANIFEST = "manifest.json"
SEAL = "manifest.hmac"
SUFFIX = ".corral-backup.tar"
PART_RE = re.compile(r"[a-z][a-z0-9_.-]{0,63}")
PARTS = ("slurmctld-state.tar.gz", "accounting.sql.gz", "corral-state.tar.gz")


@dataclass
class Manifest:
    cluster: str
    created: str                       # UTC, ISO 8601
    corral_version: str
    spec_hash: str
    slurm_version: str = ""            # "22.05.8": what wrote the state files
    controller: str = ""
    accounting: str = ""
    parts: dict[str, dict] = field(default_factory=dict)  # name -> {"bytes": n, "sha256": hex}
    format: int = FORMAT

    def to_json(self) -> dict:
        return {"format": self.format, "cluster": self.cluster, "created": self.created,
                "corral_version": self.corral_version, "spec_hash": self.spec_hash,
                "slurm_version": self.slurm_version, "controller": self.controller,
                "accounting": self.accounting, "parts": self.parts}


def pack(dest: Path, manifest: Manifest, parts: dict[str, Path], key: bytes) -> Path:
    """Write the backup to `dest`, authenticated under `key` (0600; through a temporary name, so
    `dest` is whole or absent)."""
    for name, path in parts.items():
        manifest.parts[name] = {"bytes": path.stat().st_size, "sha256": sha256_file(path)}
    tmp = dest.with_name(f".{dest.name}.partial")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        with os.fdopen(fd, "wb") as f, tarfile.open(fileobj=f, mode="w", format=tarfile.PAX_FORMAT) as tar:
            data = json.dumps(manifest.to_json(), indent=2).encode()
            for name, content in ((MANIFEST, data), (SEAL, auth.seal(data, key))):
                info = tarfile.TarInfo(name)
                info.size, info.mode = len(content), 0o600
                tar.addfile(info, io.BytesIO(content))
            for name, path in parts.items():
                info = tarfile.TarInfo(name)
                info.size, info.mode = path.stat().st_size, 0o600
                with open(path, "rb") as src:
                    tar.addfile(info, src)
        os.replace(tmp, dest)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return dest


def _bad(path: Path, what: str) -> CorralError:
    return CorralError(f"not a usable corral backup: {what}", where=str(path),
                       fix="choose another backup file (`ls` the backup directory); this one was not changed")


def _manifest(path: Path, raw: bytes) -> Manifest:
    try:
        data = json.loads(raw)
        if data.get("format") != FORMAT:
            raise _bad(path, f"backup format {data.get('format')!r}, this corral reads format {FORMAT}")
        parts = data["parts"]
        if not isinstance(parts, dict) or not all(isinstance(p, dict) for p in parts.values()):
            raise _bad(path, "the manifest's parts are not a table")
        return Manifest(cluster=str(data["cluster"]), created=str(data["created"]),
                        corral_version=str(data.get("corral_version", "")), spec_hash=str(data.get("spec_hash", "")),
                        slurm_version=str(data.get("slurm_version", "")), controller=str(data.get("controller", "")),
                        accounting=str(data.get("accounting", "")), parts=parts)
    except CorralError:
        raise
    except (ValueError, KeyError, AttributeError, TypeError) as exc:
        raise _bad(path, f"its manifest is unreadable ({type(exc).__name__}: {exc})") from None


def _authentic(path: Path, tar: tarfile.TarFile, members: list[tarfile.TarInfo], key: bytes) -> bytes:
    """The manifest's bytes, once its MAC checks under `key`."""
    names = [m.name for m in members]
    if not names or names[0] != MANIFEST:
        raise _bad(path, f"it does not start with {MANIFEST}")
    if len(names) < 2 or names[1] != SEAL or not members[0].isfile() or not members[1].isfile():
        raise _bad(path, f"it is not authenticated (no {SEAL}): written by a corral from before backups were "
                         "authenticated (format 1), or altered")
    raw = tar.extractfile(members[0]).read(1 << 20)
    wrong = auth.check(raw, tar.extractfile(members[1]).read(4096), key)
    if wrong:
        raise CorralError(f"backup refused: {wrong}", where=str(path),
                          fix="restore a backup taken from this state dir, or give the key of the state dir that "
                              "took it with --key FILE; nothing was changed")
    return raw


def verify(path: Path, cluster: str, into: Path, key: bytes) -> tuple[Manifest, dict[str, Path]]:
    """Check the backup at `path` for `cluster` (authentic under `key`, whole) and unpack its parts
    into the directory `into`. Returns the manifest and each part's file; raises CorralError naming
    what is wrong."""
    path = Path(path)
    try:
        tar = tarfile.open(path, mode="r:")
    except FileNotFoundError:
        raise CorralError("backup file not found", where=str(path), fix="give the path of a *.corral-backup.tar file") from None
    except (tarfile.TarError, OSError) as exc:
        raise _bad(path, f"not a tar file ({exc})") from None
    out: dict[str, Path] = {}
    with tar:
        try:
            members = tar.getmembers()
        except (tarfile.TarError, OSError, EOFError) as exc:
            raise _bad(path, f"truncated or damaged ({exc})") from None
        manifest = _manifest(path, _authentic(path, tar, members, key))
        if manifest.cluster != cluster:
            raise CorralError(f"this backup is of cluster {manifest.cluster!r}, the spec is of {cluster!r}",
                              where=str(path), fix="restore a backup of this cluster (or use the spec it was taken with)")
        for m in members[2:]:
            if not (m.isfile() and PART_RE.fullmatch(m.name) and m.name in manifest.parts
                    and PurePosixPath(m.name).name == m.name) or m.name in out:
                raise _bad(path, f"unexpected member {m.name!r}")
            dest = Path(into) / m.name
            fd = os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            h = hashlib.sha256()
            try:
                with os.fdopen(fd, "wb") as f, tar.extractfile(m) as src:
                    for chunk in iter(lambda: src.read(1 << 20), b""):
                        h.update(chunk)
                        f.write(chunk)
            except (tarfile.TarError, OSError, EOFError) as exc:
                raise _bad(path, f"truncated or damaged in {m.name} ({exc})") from None
            want = manifest.parts[m.name]
            if h.hexdigest() != want.get("sha256") or dest.stat().st_size != want.get("bytes"):
                raise _bad(path, f"checksum mismatch in {m.name} (the file is corrupted)")
            out[m.name] = dest
    missing = sorted(set(manifest.parts) - set(out))
    if missing:
        raise _bad(path, f"parts listed in the manifest are missing: {', '.join(missing)}")
    return manifest, out
