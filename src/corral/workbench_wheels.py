"""The notebook hub's wheels on the control host: the pinned, hash-checked lists (render/files/jupyter-pyXY.txt,
written by scripts/jupyter-lock.sh) and the wheelhouse fetched once per list from the package registry into
corral's cache, then packed for the node that builds the venv (deploy/jupyterhub.py).

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
from importlib.resources import files
from pathlib import Path

from corral.errors import CorralError

CACHE = Path("/var/cache/corral")  # the control host's cache (virtual/image.py's too)
FETCH_TIMEOUT_S = 900
LINE = re.compile(r"([A-Za-z0-9_.-]+)==([A-Za-z0-9_.+!-]+) --hash=sha256:([0-9a-f]{64})")
PLATFORMS = ("manylinux_2_36_x86_64", "manylinux_2_28_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64",
             "linux_x86_64", "any")  # the same as scripts/jupyter-lock.sh: pip then picks the same wheels


PYTHONS = ("3.11", "3.13")  # the Pythons corral pins wheels for: debian-12's and debian-13's


def has_lock(python: str) -> bool:
    return python in PYTHONS


def lock_name(python: str) -> str:
    return f"jupyter-py{python.replace('.', '')}.txt"


def lock_text(python: str) -> str:
    """The pinned list for CPython `python` (3.11, 3.13); CorralError when corral has none."""
    try:
        return files("corral.render").joinpath("files", lock_name(python)).read_text()
    except FileNotFoundError:
        raise CorralError(f"corral has no pinned notebook wheels for Python {python}", where=lock_name(python),
                          fix="run the hub on a node release whose Python corral pins (docs/components/"
                              "notebooks.md)") from None


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


def lock_id(python: str) -> str:
    """What names the venv built from the list: the list's own sha256 (a changed pin is a new venv)."""
    return hashlib.sha256(lock_text(python).encode()).hexdigest()[:16]


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _complete(d: Path, want: dict[str, tuple[str, str]]) -> bool:
    have = sorted(_sha256(p) for p in d.glob("*.whl"))
    return have == sorted(sha for _, sha in want.values())


def wheelhouse(cache: Path, python: str) -> Path:
    """The directory of the list's wheels in `cache`, fetched from the registry when missing or not exactly
    the list's files (pip checks each hash as it downloads; the set is checked again after)."""
    text = lock_text(python)
    want = pins(text)
    d = Path(cache) / "wheels" / f"py{python}-{lock_id(python)}"
    if d.is_dir() and _complete(d, want):
        return d
    d.mkdir(parents=True, exist_ok=True)
    for stale in d.glob("*.whl"):
        stale.unlink()
    (d / "requirements.txt").write_text(text)
    log = d / "fetch.log"
    argv = [sys.executable, "-m", "pip", "download", "--disable-pip-version-check", "--no-deps", "--require-hashes",
            "--only-binary=:all:", "--python-version", python, "--implementation", "cp",
            "--abi", "cp" + python.replace(".", ""), *[a for p in PLATFORMS for a in ("--platform", p)],
            "-d", str(d), "-r", str(d / "requirements.txt")]
    try:
        with log.open("w") as out:
            rc = subprocess.run(argv, stdout=out, stderr=subprocess.STDOUT, timeout=FETCH_TIMEOUT_S).returncode
    except subprocess.TimeoutExpired:
        rc = "timed out"
    if rc != 0 or not _complete(d, want):
        raise CorralError(f"fetching the notebook hub's {len(want)} wheels from the package registry failed "
                          f"({'exit ' + str(rc) if rc != 'timed out' else f'not done in {FETCH_TIMEOUT_S} s'})",
                          where=str(log), fix="read the log (the registry unreachable? a proxy needed?) and apply "
                                              "again; an air-gapped site brings them with `corral bundle build`")
    return d


def checked_dir(d: Path, python: str) -> Path:
    """A wheelhouse carried in (a verified air-gap bundle's notebook/pyX.Y): exactly the list's wheels, each
    checked against corral's own list (never against a checksum the bundle carries), or a CorralError."""
    want = pins(lock_text(python))
    if not d.is_dir() or not _complete(d, want):
        raise CorralError(f"the bundle does not carry the notebook hub's {len(want)} wheels for Python {python} as "
                          "this corral pins them", where=str(d),
                          fix="build the bundle again with this corral (`corral bundle build` carries them when the "
                              "spec has workbench.jupyterhub)")
    return d


def carry(cluster_python: str, cache: Path, dest: Path) -> list[dict]:
    """For `corral bundle build`: the list's wheels (fetched and checked as for an apply) and the list itself
    copied into `dest`; their manifest entries (paths relative to dest's parent's parent: notebook/pyX.Y/...)."""
    src = wheelhouse(cache, cluster_python)
    dest.mkdir(parents=True, exist_ok=True)
    out = []
    for p in sorted([*src.glob("*.whl"), src / "requirements.txt"]):
        (dest / p.name).write_bytes(p.read_bytes())
        out.append({"file": f"notebook/{dest.name}/{p.name}", "sha256": _sha256(p), "size": p.stat().st_size})
    return out


def packed(d: Path, python: str) -> bytes:
    """The wheelhouse as one tar: its wheels and corral's own list for `python` as requirements.txt (never a
    list that came with the wheels: pip's --require-hashes reads this one), in name order with fixed
    metadata, so the same wheels give the same bytes."""
    buf = io.BytesIO()
    listed = lock_text(python).encode()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for p in sorted(d.glob("*.whl")):
            info = tarfile.TarInfo(p.name)
            info.size, info.mode, info.mtime = p.stat().st_size, 0o644, 0
            with p.open("rb") as f:
                tar.addfile(info, f)
        info = tarfile.TarInfo("requirements.txt")
        info.size, info.mode, info.mtime = len(listed), 0o644, 0
        tar.addfile(info, io.BytesIO(listed))
    return buf.getvalue()


