"""corral and its Python dependencies (not the test extras) as one relocatable tarball, built from
the control host's own installation: every file of each installed distribution of the requirement
closure, corral's package from where it is imported. Unpacked on a node into
/var/lib/corral/runtime/<id>/ and run as `PYTHONPATH=<dir> python3 -P -m corral` from /.

Compiled extensions (pydantic-core, gevent, ...) tie it to one Python minor version and platform:
built for the nodes' Python (their release's), which may not be the control host's. For another
Python, each distribution with version-specific compiled files is taken from its wheel for that
Python instead, the same version as installed here (fanout/wheels.py: fetched from the package
registry once, cached under the state dir). RUNTIME.json says which Python, and the node refuses
another (fanout/slurm.py TASK).

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
from corral.fanout import wheels
from corral.fanout.wheels import Member

DIR = "runtime"  # under the state dir
LEGACY_INDEX = "index.json"  # before one index per Python: removed
Source = Path | Member  # a file of this host, or a member of a wheel for another Python
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


def index_name(python: str) -> str:
    """The last tarball's id for `python` and what it was made of: one per Python, so that fan-outs to
    releases of different Pythons do not rebuild each other's."""
    return f"index-{python}.json"


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


def files(python: str | None = None, state_dir: Path | None = None) -> dict[str, Source]:
    """{name in the tarball: its source}: corral's package, then each distribution's files; for a
    `python` other than this host's, the distributions compiled for one Python version from their
    wheels for `python` (fetched into <state_dir>/runtime/wheels-X.Y/ when not there yet)."""
    out: dict[str, Source] = {}
    package = Path(corral.__file__).resolve().parent
    for path in sorted(package.rglob("*")):
        rel = "corral/" + path.relative_to(package).as_posix()
        if path.is_file() and _keep(rel):
            out[rel] = path
    dists = closure()
    replaced: set[str] = set()
    if python is not None and python != python_tag():
        if state_dir is None:
            raise ValueError("a runtime for another Python needs the state dir (its wheel cache)")
        cache = wheels.cache_dir(state_dir / DIR, python)
        for dist in wheels.compiled(dists):
            name = dist.metadata["Name"]
            replaced.add(name)
            wheel = wheels.fetch(cache, name, dist.version, python)
            for rel, member in wheels.members(wheel, wheels.import_names(dist)).items():
                if _keep(rel) and not rel.startswith("corral/"):
                    out[rel] = member
    for dist in dists:
        if dist.metadata["Name"] in replaced:
            continue
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


def _fingerprint(found: dict[str, Source], meta: dict) -> str:
    """What the tarball is made of, cheaply: every name with its file's (or its wheel's) size and mtime."""
    h = hashlib.sha256(json.dumps(meta, sort_keys=True).encode())
    for name, src in sorted(found.items()):
        if isinstance(src, Member):
            st = src.wheel.stat()
            h.update(f"{name}\0{src.wheel.name}\0{src.name}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
        else:
            st = src.stat()
            h.update(f"{name}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    return h.hexdigest()[:32]


def build(state_dir: Path, python: str | None = None) -> Runtime:
    """The tarball in <state dir>/runtime/ for the nodes' `python` ("X.Y"; None: this host's), built once
    per installation and Python: while no file changed (names, sizes, times: its index) the one built
    before is used without reading or packing anything."""
    target = python or python_tag()
    meta = {"corral": __version__, "python": target, "platform": f"{sys.platform}-{platform.machine()}"}
    found = files(target, state_dir)
    key = _fingerprint(found, meta)
    index = state_dir / DIR / index_name(target)
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
    _prune(state_dir / DIR, runtime.path)
    return runtime


def _prune(d: Path, keep: Path) -> None:
    """Tarballs no Python's index names any more (and the index of before one per Python)."""
    (d / LEGACY_INDEX).unlink(missing_ok=True)
    named = {keep.name}
    for index in d.glob("index-*.json"):
        try:
            named.add(f"corral-runtime-{json.loads(index.read_text())['id']}.tar.gz")
        except (OSError, ValueError, KeyError, TypeError):
            continue
    for old in d.glob("corral-runtime-*.tar.gz"):
        if old.name not in named:
            old.unlink(missing_ok=True)


def _pack(found: dict[str, Source], meta: dict, state_dir: Path) -> Runtime:
    from_wheels = wheels.read([s for s in found.values() if isinstance(s, Member)])
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, src in sorted(found.items()):
            if isinstance(src, Member):
                _add(tar, name, from_wheels[src], src.mode)
            else:
                _add(tar, name, src.read_bytes(), 0o755 if os.access(src, os.X_OK) else 0o644)
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
    return Runtime(id=rid, path=target, size=len(data), python=meta["python"])
