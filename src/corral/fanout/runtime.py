"""corral and its Python dependencies (not the test extras) as one relocatable tarball, built from
the control host's own installation (no network): every file of each installed distribution of the
requirement closure, corral's package from where it is imported. Unpacked on a node into
/var/lib/corral/runtime/<id>/ and run as `PYTHONPATH=<dir> python3 -P -m corral` from /. Compiled extensions
(pydantic-core, gevent, cryptography) tie it to the control host's Python minor version and
platform; RUNTIME.json says which, and the node refuses another (fanout/slurm.py TASK).

Deterministic: names sorted, times, owners and the gzip header zeroed, so the same installation
gives the same id (the sha256's first 16 hex digits) and a node that has it is not sent it again."""

from __future__ import annotations

import gzip
import hashlib
import importlib.metadata as md
import io
import json
import os
import platform
import sys
import tarfile
from dataclasses import dataclass
from pathlib import Path

from packaging.requirements import Requirement

import corral
from corral import __version__
from corral.errors import CorralError

DIR = "runtime"  # under the state dir
INDEX = "index.json"  # the last tarball's id and what it was made of
SKIP_PARTS = {"__pycache__", "tests", "testing"}
SKIP_SUFFIXES = (".pyc", ".pyi")


@dataclass(frozen=True)
class Runtime:
    id: str
    path: Path
    size: int
    python: str


def python_tag() -> str:
    return f"{sys.version_info[0]}.{sys.version_info[1]}"


def closure(root: str = "corral") -> list[md.Distribution]:
    """The installed distributions `root` needs (markers evaluated without extras), sorted by name."""
    seen: dict[str, md.Distribution] = {}
    todo = [root]
    while todo:
        name = todo.pop()
        key = name.lower().replace("_", "-").replace(".", "-")
        if key in seen:
            continue
        try:
            dist = md.distribution(name)
        except md.PackageNotFoundError:
            raise CorralError(f"the Python package {name!r} that corral needs is not installed on the control host",
                              fix="reinstall corral (pip install corral) in this environment") from None
        seen[key] = dist
        for text in dist.requires or []:
            req = Requirement(text)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                todo.append(req.name)
    return [seen[k] for k in sorted(seen) if k != root]


def _keep(rel: str) -> bool:
    parts = rel.split("/")
    return not (SKIP_PARTS & set(parts)) and not rel.endswith(SKIP_SUFFIXES) and ".." not in parts


def files() -> dict[str, Path]:
    """{name in the tarball: file on this host}: corral's package, then each distribution's files."""
    out: dict[str, Path] = {}
    package = Path(corral.__file__).resolve().parent
    for path in sorted(package.rglob("*")):
        rel = "corral/" + path.relative_to(package).as_posix()
        if path.is_file() and _keep(rel):
            out[rel] = path
    for dist in closure():
        for f in dist.files or []:
            rel = f.as_posix()
            path = Path(dist.locate_file(f)).resolve()
            if _keep(rel) and not rel.startswith("corral/") and path.is_file():
                out[rel] = path
    return out


def _add(tar: tarfile.TarFile, name: str, data: bytes, mode: int = 0o644) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mode, info.mtime, info.uid, info.gid, info.uname, info.gname = len(data), mode, 0, 0, 0, "root", "root"
    tar.addfile(info, io.BytesIO(data))


def _fingerprint(found: dict[str, Path], meta: dict) -> str:
    """What the tarball is made of, cheaply: every name with its file's size and mtime."""
    h = hashlib.sha256(json.dumps(meta, sort_keys=True).encode())
    for name, path in sorted(found.items()):
        st = path.stat()
        h.update(f"{name}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    return h.hexdigest()[:32]


def build(state_dir: Path) -> Runtime:
    """The tarball in <state dir>/runtime/, built once per installation: while no file changed (names,
    sizes, times: INDEX) the one built before is used without reading or packing anything."""
    meta = {"corral": __version__, "python": python_tag(), "platform": f"{sys.platform}-{platform.machine()}"}
    found = files()
    key = _fingerprint(found, meta)
    index = state_dir / DIR / INDEX
    try:
        known = json.loads(index.read_text())
        cached = state_dir / DIR / f"corral-runtime-{known['id']}.tar.gz"
        if known.get("fingerprint") == key and cached.is_file():
            return Runtime(id=known["id"], path=cached, size=cached.stat().st_size, python=meta["python"])
    except (OSError, ValueError, KeyError, TypeError):
        pass
    runtime = _pack(found, meta, state_dir)
    tmp = index.with_suffix(".tmp")
    tmp.write_text(json.dumps({"fingerprint": key, "id": runtime.id}) + "\n")
    tmp.replace(index)
    return runtime


def _pack(found: dict[str, Path], meta: dict, state_dir: Path) -> Runtime:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, path in sorted(found.items()):
            _add(tar, name, path.read_bytes(), 0o755 if os.access(path, os.X_OK) else 0o644)
        _add(tar, "RUNTIME.json", (json.dumps(meta, sort_keys=True) + "\n").encode())
    packed = io.BytesIO()
    with gzip.GzipFile(fileobj=packed, mode="wb", mtime=0, compresslevel=6) as gz:
        gz.write(raw.getvalue())
    data = packed.getvalue()
    rid = hashlib.sha256(data).hexdigest()[:16]
    target = state_dir / DIR / f"corral-runtime-{rid}.tar.gz"
    if not target.is_file():
        target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        tmp = target.with_suffix(".tmp")
        tmp.write_bytes(data)
        tmp.replace(target)
    for old in target.parent.glob("corral-runtime-*.tar.gz"):
        if old != target:
            old.unlink()
    return Runtime(id=rid, path=target, size=len(data), python=meta["python"])
