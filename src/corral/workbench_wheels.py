"""The workbench's venvs' files on the control host: the pinned, hash-checked lists (render/files/<venv>-pyXY.txt,
written by scripts/venv-lock.sh) and the wheelhouse fetched once per list from the package registry into
corral's cache, then packed for the node that builds the venv (deploy/venvs.py). Two venvs: the notebook
hub's (wheels only) and EasyBuild's (PyPI carries only sdists of it: they are built on the node, from the
list's setuptools and wheel, with no build isolation, so nothing but the listed files is ever installed).

The hashes come from the list in corral's own tree, never from the registry or the cache: pip refuses a
wheel whose sha256 differs (--require-hashes), and a cached wheelhouse is checked file by file against the
list before it is packed. The fetch is bounded and its failure names the step and the log.
"""

from __future__ import annotations

import hashlib
import io
import re
import subprocess
import sys
import tarfile
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path

from corral.errors import CorralError

CACHE = Path("/var/cache/corral")  # the control host's cache (virtual/image.py's too)
FETCH_TIMEOUT_S = 900
LINE = re.compile(r"([A-Za-z0-9_.-]+)==([A-Za-z0-9_.+!-]+) --hash=sha256:([0-9a-f]{64})")
PLATFORMS = ("manylinux_2_36_x86_64", "manylinux_2_28_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64",
             "linux_x86_64", "any")  # the same as scripts/venv-lock.sh: pip then picks the same wheels


PYTHONS = ("3.11", "3.13")  # the Pythons corral pins wheels for: debian-12's and debian-13's


@dataclass(frozen=True)
class Venv:
    """One venv's lists: render/files/<name>-pyXY.txt; carried in a bundle as <carried>/pyX.Y/."""

    name: str           # the lists' prefix
    what: str           # for messages: "the notebook hub's"
    carried: str        # the bundle's directory
    doc: str            # where a user reads about it
    wheels_only: bool   # False: the list holds sdists too (pip builds them from the list's own setuptools)
    build: tuple[str, ...] = ()  # installed first, alone: what builds the sdists


NOTEBOOK = Venv("jupyter", "the notebook hub's", "notebook", "docs/components/notebooks.md", True)
EASYBUILD = Venv("easybuild", "EasyBuild's", "easybuild", "docs/components/software.md", False,
                 ("setuptools", "wheel"))


def has_lock(python: str) -> bool:
    return python in PYTHONS


def lock_name(python: str, venv: Venv = NOTEBOOK) -> str:
    return f"{venv.name}-py{python.replace('.', '')}.txt"


def lock_text(python: str, venv: Venv = NOTEBOOK) -> str:
    """The pinned list for CPython `python` (3.11, 3.13); CorralError when corral has none."""
    try:
        return files("corral.render").joinpath("files", lock_name(python, venv)).read_text()
    except FileNotFoundError:
        raise CorralError(f"corral has no pinned list of {venv.what} files for Python {python}",
                          where=lock_name(python, venv),
                          fix=f"use a node release whose Python corral pins ({venv.doc})") from None


def pins(text: str) -> dict[str, tuple[str, str]]:
    """name (lowercase, - for _) -> (version, sha256) of every line of a list; ValueError on a line that is
    not `name==version --hash=sha256:HEX`."""
    out = {}
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        m = LINE.fullmatch(line.strip())
        if not m:
            raise ValueError(f"{n}: not a pinned, hashed wheel: {line[:80]!r}")
        out[re.sub(r"[-_.]+", "-", m.group(1)).lower()] = (m.group(2), m.group(3))
    return out


def lock_id(python: str, venv: Venv = NOTEBOOK) -> str:
    """What names the venv built from the list: the list's own sha256 (a changed pin is a new venv)."""
    return hashlib.sha256(lock_text(python, venv).encode()).hexdigest()[:16]


def build_lines(python: str, venv: Venv) -> str:
    """The list's lines of what builds its sdists (installed first); empty for a wheels-only list."""
    keep = [line for line in lock_text(python, venv).splitlines()
            if re.sub(r"[-_.]+", "-", line.split("==")[0]).lower() in venv.build]
    return "\n".join(keep) + ("\n" if keep else "")


def _files(d: Path) -> list[Path]:
    return sorted([*d.glob("*.whl"), *d.glob("*.tar.gz")])


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _complete(d: Path, want: dict[str, tuple[str, str]]) -> bool:
    have = sorted(_sha256(p) for p in _files(d))
    return have == sorted(sha for _, sha in want.values())


def wheelhouse(cache: Path, python: str, venv: Venv = NOTEBOOK) -> Path:
    """The directory of the list's files in `cache`, fetched from the registry when missing or not exactly
    the list's files (pip checks each hash as it downloads; the set is checked again after)."""
    text = lock_text(python, venv)
    want = pins(text)
    prefix = "" if venv is NOTEBOOK else f"{venv.name}-"  # the notebook's cache keeps the name it always had
    d = Path(cache) / "wheels" / f"{prefix}py{python}-{lock_id(python, venv)}"
    if d.is_dir() and _complete(d, want):
        return d
    d.mkdir(parents=True, exist_ok=True)
    for stale in _files(d):
        stale.unlink()
    (d / "requirements.txt").write_text(text)
    log = d / "fetch.log"
    if not venv.wheels_only:  # sdists: fetched by their pins alone, never built here (pinned_files.py)
        from corral.pinned_files import fetch
        problems = fetch(want, d, FETCH_TIMEOUT_S)
        log.write_text("".join(f"{p}\n" for p in problems) or "every file fetched and checked\n")
        if problems or not _complete(d, want):
            raise CorralError(f"fetching {venv.what} {len(want)} files from the package registry failed: "
                              f"{problems[0] if problems else 'not every file'}", where=str(log),
                              fix="apply again (the registry unreachable? a proxy needed?); an air-gapped site "
                                  "brings them with `corral bundle build`")
        return d
    argv = [sys.executable, "-I", "-m", "pip", "download", "--disable-pip-version-check", "--no-deps", "--require-hashes",
            "--only-binary=:all:", "--python-version", python, "--implementation", "cp",
            "--abi", "cp" + python.replace(".", ""), *[a for p in PLATFORMS for a in ("--platform", p)],
            "-d", str(d), "-r", str(d / "requirements.txt")]
    try:
        with log.open("w") as out:
            rc = subprocess.run(argv, stdout=out, stderr=subprocess.STDOUT, timeout=FETCH_TIMEOUT_S).returncode
    except subprocess.TimeoutExpired:
        rc = "timed out"
    if rc != 0 or not _complete(d, want):
        raise CorralError(f"fetching {venv.what} {len(want)} files from the package registry failed "
                          f"({'exit ' + str(rc) if rc != 'timed out' else f'not done in {FETCH_TIMEOUT_S} s'})",
                          where=str(log), fix="read the log (the registry unreachable? a proxy needed?) and apply "
                                              "again; an air-gapped site brings them with `corral bundle build`")
    return d


def checked_dir(d: Path, python: str, venv: Venv = NOTEBOOK) -> Path:
    """A wheelhouse carried in (a verified air-gap bundle's <carried>/pyX.Y): exactly the list's files, each
    checked against corral's own list (never against a checksum the bundle carries), or a CorralError."""
    want = pins(lock_text(python, venv))
    if not d.is_dir() or not _complete(d, want):
        raise CorralError(f"the bundle does not carry {venv.what} {len(want)} files for Python {python} as "
                          "this corral pins them", where=str(d),
                          fix=f"build the bundle again with this corral (`corral bundle build` carries them when the "
                              f"spec asks for them: {venv.doc})")
    return d


def carry(cluster_python: str, cache: Path, dest: Path, venv: Venv = NOTEBOOK) -> list[dict]:
    """For `corral bundle build`: the list's files (fetched and checked as for an apply) and the list itself
    copied into `dest`; their manifest entries (paths relative to dest's parent's parent: <carried>/pyX.Y/...)."""
    src = wheelhouse(cache, cluster_python, venv)
    dest.mkdir(parents=True, exist_ok=True)
    out = []
    for p in [*_files(src), src / "requirements.txt"]:
        (dest / p.name).write_bytes(p.read_bytes())
        out.append({"file": f"{venv.carried}/{dest.name}/{p.name}", "sha256": _sha256(p), "size": p.stat().st_size})
    return out


def packed(d: Path, python: str, venv: Venv = NOTEBOOK) -> bytes:
    """The wheelhouse as one tar: its files, corral's own list for `python` as requirements.txt (never a list
    that came with the files: pip's --require-hashes reads this one) and, for a list with sdists, the lines
    of what builds them as build.txt, in name order with fixed metadata, so the same files give the same bytes."""
    buf = io.BytesIO()
    lists = [("requirements.txt", lock_text(python, venv).encode())]
    if venv.build:
        lists.append(("build.txt", build_lines(python, venv).encode()))
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for p in _files(d):
            info = tarfile.TarInfo(p.name)
            info.size, info.mode, info.mtime = p.stat().st_size, 0o644, 0
            with p.open("rb") as f:
                tar.addfile(info, f)
        for name, data in lists:
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(data), 0o644, 0
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


