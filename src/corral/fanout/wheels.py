"""The compiled part of the corral runtime for a Python other than the control host's (fanout/runtime.py).

The runtime is packed from the control host's own installation, whose compiled extensions
(`*.cpython-311-x86_64-linux-gnu.so`) load only in that Python minor version; a node of another release
(Debian 13: Python 3.13) cannot import them. For each distribution of the closure with such files the
runtime takes instead the contents of that distribution's wheel for the nodes' Python: the same name and
version as installed here, fetched from the package registry with `pip download` (binary only, no
dependencies, manylinux for this machine's architecture) into <state dir>/runtime/wheels-X.Y/ once and
read from there after. abi3 extensions (`*.abi3.so`) load in any later Python and are kept as installed.
An offline control host needs the wheels placed in that directory beforehand.

A wheel is input from outside, and what it holds runs as root on every node: only a file whose sha256 corral's
own list names (wheels-lock.txt: name, version, Python, machine) is fetched (pip `--require-hashes`) or taken
from the cache (security review 3, N4). The control host's compiled distributions are installed at those versions
(scripts/constraints.txt, which bootstrap.sh installs with); another version is refused with what to do. A member
whose name is absolute or climbs (`..`), or lies outside the distribution's own top-level names, is refused."""

from __future__ import annotations

import hashlib
import importlib.metadata as md
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from packaging.tags import Tag, cpython_tags
from packaging.utils import canonicalize_name, parse_wheel_filename
from packaging.version import Version

from corral.errors import CorralError

FETCH_TIMEOUT_S = 300  # one distribution's pip download
# pip prefers the first tag a project publishes: the oldest glibc first, the wheel most releases load
MANYLINUX = ("manylinux_2_17", "manylinux2014", "manylinux_2_24", "manylinux_2_26", "manylinux_2_27",
             "manylinux_2_28", "manylinux_2_31", "manylinux_2_32", "manylinux_2_33", "manylinux_2_34",
             "manylinux_2_35", "manylinux_2_36")  # up to Debian 12's glibc
COMPILED = re.compile(r"\.cpython-3\d+-[^/]*\.so$")  # tied to one minor version (abi3 ones are not)
DATA_LIBS = ("purelib", "platlib")  # a wheel's NAME.data/<these>/ install at the root, the other .data/ dirs elsewhere


@dataclass(frozen=True)
class Member:
    """One file of a wheel, as a source of the runtime tarball."""
    wheel: Path
    name: str     # in the zip
    mode: int


def cache_dir(runtime_dir: Path, python: str) -> Path:
    return runtime_dir / f"wheels-{python}"


def platforms(machine: str | None = None) -> list[str]:
    arch = machine or platform.machine()
    return [f"{m}_{arch}" for m in MANYLINUX]


def compiled(dists: list[md.Distribution]) -> list[md.Distribution]:
    """The distributions with files compiled for one Python minor version (`.cpython-3NN-*.so`)."""
    return [d for d in dists if any(COMPILED.search(f.as_posix()) for f in d.files or [])]


def _fits(path: Path, name: str, version: str, python: str, machine: str | None = None) -> bool:
    """`path` is a wheel of name==version that loads in CPython `python` on this machine."""
    try:
        wname, wver, _, tags = parse_wheel_filename(path.name)
    except ValueError:
        return False
    major, minor = (int(x) for x in python.split("."))
    ok: set[Tag] = set(cpython_tags((major, minor), abis=[f"cp{major}{minor}"], platforms=platforms(machine)))
    return wname == canonicalize_name(name) and wver == Version(version) and bool(tags & ok)


LOCK = Path(__file__).with_name("wheels-lock.txt")


def pinned(name: str, version: str, python: str, machine: str | None = None) -> set[str]:
    """The sha256 of each wheel file of name==version for `python` on `machine` that corral accepts."""
    arch, want = machine or platform.machine(), canonicalize_name(name)
    out = set()
    for line in LOCK.read_text().splitlines():
        f = line.split()
        if len(f) >= 5 and not line.startswith("#") and canonicalize_name(f[0]) == want and f[1:4] == [
                version, python, arch]:
            out.add(f[4])
    return out


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def cached(cache: Path, name: str, version: str, python: str) -> Path | None:
    """A wheel in `cache` that fits and whose sha256 corral's list names (any other file there is not taken)."""
    if not cache.is_dir():
        return None
    pins = pinned(name, version, python)
    found = sorted(p for p in cache.glob("*.whl") if _fits(p, name, version, python) and _sha256(p) in pins)
    return found[0] if found else None


def fetch(cache: Path, name: str, version: str, python: str, timeout: int = FETCH_TIMEOUT_S) -> Path:
    """The wheel of name==version for `python`: from the cache, else downloaded into it by pip (into a
    temporary directory first, so that an interrupted download never leaves a wheel's name behind)."""
    pins = pinned(name, version, python)
    if not pins:
        raise CorralError(f"corral pins no wheel of {name}=={version} for Python {python} on {platform.machine()} "
                          f"({LOCK.name}): it runs as root on the nodes, so nothing unpinned is fetched",
                          where=str(LOCK), fix="install corral as scripts/bootstrap.sh does (its compiled dependencies "
                          "at the versions of scripts/constraints.txt), or run the nodes on the control host's release")
    have = cached(cache, name, version, python)
    if have is not None:
        return have
    cache.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = Path(tempfile.mkdtemp(prefix=".fetch-", dir=cache))
    try:
        _pip_download(tmp, name, version, python, timeout)
        got = cached(tmp, name, version, python)
        if got is None:
            raise CorralError(f"pip download of {name}=={version} for Python {python} gave no wheel that fits and "
                              f"matches corral's pinned sha256", where=str(cache), fix=_FIX)
        os.replace(got, cache / got.name)
        return cache / got.name
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


_FIX = ("the control host needs the package registry (PyPI) to fetch it, or the wheel placed beforehand in "
        "the cache directory named here")


def _pip_download(dest: Path, name: str, version: str, python: str, timeout: int) -> None:
    wanted = dest / "requirements.txt"  # pip checks the file it downloads against corral's own hashes
    wanted.write_text(f"{name}=={version} " + " ".join(f"--hash=sha256:{h}" for h in sorted(
        pinned(name, version, python))) + "\n")
    argv = [sys.executable, "-I", "-m", "pip", "download", "--disable-pip-version-check", "--no-input",
            "--progress-bar", "off", "--no-deps", "--only-binary=:all:", "--python-version", python,
            "--implementation", "cp", "--abi", "cp" + python.replace(".", ""),
            *[a for p in platforms() for a in ("--platform", p)], "-d", str(dest), "--require-hashes",
            "-r", str(wanted)]
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:  # the whole group: nothing pip started keeps the pipe open
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise CorralError(f"fetching the wheel of {name}=={version} for Python {python} did not finish within "
                          f"{timeout} s", where=str(dest.parent), fix=_FIX) from None
    if proc.returncode != 0:
        said = " | ".join(line.strip() for line in out.strip().splitlines()[-3:])
        raise CorralError(f"fetching the wheel of {name}=={version} for Python {python} failed: "
                          f"{said or f'pip exit {proc.returncode}'}", where=str(dest.parent), fix=_FIX)


def safe_name(wheel: Path, name: str) -> str:
    """A member's name, refused when absolute or climbing out of the runtime."""
    if name.startswith("/") or "\\" in name or ".." in name.split("/") or re.match(r"^[A-Za-z]:", name):
        raise CorralError(f"the wheel {wheel.name} holds a file named {name!r}, outside the directory it unpacks to",
                          where=str(wheel), fix="remove that wheel from the cache directory; fetch it again from "
                                                "the package registry")
    return name


def import_names(dist: md.Distribution) -> set[str]:
    """The top-level names the distribution installed here puts in site-packages (its packages and modules, each by
    its name before the first dot: `_cffi_backend` for `_cffi_backend.cpython-311-...so`)."""
    out = set()
    for f in dist.files or []:
        first = f.parts[0] if f.parts else ""
        if first and first not in ("..", "__pycache__") and not first.endswith((".dist-info", ".data")):
            out.add(first.split(".")[0])
    return out


def members(wheel: Path, allowed: set[str] | None = None) -> dict[str, Member]:
    """{name in the runtime: member}: the wheel's files as pip would install them in site-packages
    (NAME.data/purelib|platlib/ at the root, the other .data/ directories, scripts and headers, left out).
    `allowed`: the top-level names the same distribution installed here has (import_names): a member under any
    other name (a `sitecustomize.py`, a package of another's) is refused, beside the wheel's own .dist-info
    (security review 3, N4: what the runtime carries runs as root on every node)."""
    out: dict[str, Member] = {}
    try:
        with zipfile.ZipFile(wheel) as z:
            infos = z.infolist()
    except (OSError, zipfile.BadZipFile) as e:
        raise CorralError(f"the wheel {wheel.name} cannot be read: {e}", where=str(wheel),
                          fix="remove it from the cache directory; it is fetched again") from None
    for info in infos:
        name = safe_name(wheel, info.filename)
        if info.is_dir():
            continue
        parts = name.split("/")
        if parts[0].endswith(".data"):
            if len(parts) < 3 or parts[1] not in DATA_LIBS:
                continue
            name = "/".join(parts[2:])
        top = name.split("/")[0]
        if allowed is not None and not top.endswith(".dist-info") and top.split(".")[0] not in allowed:
            raise CorralError(f"the wheel {wheel.name} holds {name}, a name the distribution installed here does "
                              f"not have (it has: {', '.join(sorted(allowed))}): refused", where=str(wheel),
                              fix="remove that wheel from the cache directory; fetch it again from the package registry")
        out[name] = Member(wheel, info.filename, 0o755 if (info.external_attr >> 16) & 0o111 else 0o644)
    return out


def read(members_: list[Member]) -> dict[Member, bytes]:
    """The members' bytes, each wheel opened once."""
    out: dict[Member, bytes] = {}
    by_wheel: dict[Path, list[Member]] = {}
    for m in members_:
        by_wheel.setdefault(m.wheel, []).append(m)
    for wheel, ms in sorted(by_wheel.items()):
        with zipfile.ZipFile(wheel) as z:
            for m in ms:
                out[m] = z.read(m.name)
    return out
