"""What a bundle holds, and why: the .debs the spec's nodes install with every dependency they need on a
clean node of the release (the virtual cluster's base image: a debootstrap minbase of Debian 12 with
the few packages corral's image adds, never the build host's own package state), resolved by apt from
the build host's sources (`apt-get install --print-uris`: the exact set, no guessing), then fetched.
"""

from __future__ import annotations

import gzip
import os
import re
import shutil
import subprocess
import time
from pathlib import Path

from corral.errors import HostToolError

URI = re.compile(r"^'(?P<uri>[^']+)' (?P<file>\S+\.deb) (?P<size>\d+) ")


def resolve(status: Path, packages: list[str], work: Path, options: list[str] = ()) -> list[str]:
    """The .deb file names apt would install for `packages` on a node whose dpkg status is `status`;
    `options`: apt options adding a vendor repository (bundle/vendor.py)."""
    work = work.resolve()  # apt takes a relative Dir:: path as relative to its own directories
    work.mkdir(parents=True, exist_ok=True)
    shutil.copy(status, work / "status")
    (work / "none").mkdir(exist_ok=True)  # an empty archive cache: apt leaves out what a cache already holds
    cmd = ["apt-get", "-q", "-o", f"Dir::State::status={work / 'status'}", "-o", "Debug::NoLocking=1",
           "-o", f"Dir::Cache::archives={work / 'none'}", *options,
           "install", "--print-uris", "--no-install-recommends", "-y", *packages]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300,
                              env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"})
    except subprocess.TimeoutExpired:
        raise HostToolError("apt-get --print-uris did not finish within 300 s") from None
    if proc.returncode != 0:
        tail = " | ".join(proc.stderr.strip().splitlines()[-4:])
        raise HostToolError(f"apt cannot resolve the spec's packages on a clean node: {tail}",
                            fix="check the build host's apt sources (apt-get update); a package named here is "
                                "not in them")
    return sorted(m["file"] for m in map(URI.match, proc.stdout.splitlines()) if m)


def download_debs(status: Path, packages: list[str], pool: Path, work: Path, options: list[str] = ()) -> None:
    """Download `packages` and every dependency they need beyond the dpkg `status` file (a clean node's,
    not the host's) into `pool`, with the host's apt sources; `work` holds apt's private state."""
    pool, work = pool.resolve(), work.resolve()  # apt takes a relative Dir:: path as relative to its own
    pool.mkdir(parents=True, exist_ok=True)
    work.mkdir(parents=True, exist_ok=True)
    shutil.copy(status, work / "status")
    apt = ["apt-get", "-q", "-o", f"Dir::State::status={work / 'status'}",
           "-o", f"Dir::Cache::archives={pool}", "-o", "Debug::NoLocking=1", *options]
    lists = Path("/var/lib/apt/lists")
    if not any(lists.glob("*_Packages*")) or time.time() - lists.stat().st_mtime > 7 * 86400:
        subprocess.run(["apt-get", "update", "-q"], capture_output=True, timeout=600, check=False)
    proc = subprocess.run([*apt, "install", "--download-only", "--no-install-recommends", "-y", *packages],
                          capture_output=True, text=True, timeout=3600,
                          env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"})
    if proc.returncode != 0:
        tail = " | ".join(proc.stderr.strip().splitlines()[-5:])
        raise HostToolError(f"could not download packages: {tail}",
                            fix="check that the host's apt sources work (apt-get update) and that the packages exist")
    for junk in ("partial", "lock"):
        p = pool / junk
        shutil.rmtree(p, ignore_errors=True) if p.is_dir() else p.unlink(missing_ok=True)


def index(repo: Path) -> str:
    """Packages and Packages.gz of the .debs under repo/pool (dpkg-scanpackages); returns the index."""
    proc = subprocess.run(["dpkg-scanpackages", "--multiversion", "pool", "/dev/null"], cwd=repo,
                          capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        raise HostToolError(f"dpkg-scanpackages failed in {repo}: {proc.stderr.strip()[-300:]}",
                            fix="apt-get install dpkg-dev")
    text = proc.stdout
    (repo / "Packages").write_text(text)
    (repo / "Packages.gz").write_bytes(gzip.compress(text.encode(), 9, mtime=0))
    return text


def fetch(files: list[str], packages: list[str], status: Path, pool: Path, work: Path,
          cache: Path | list[Path] | None, options: list[str] = ()) -> None:
    """Put exactly `files` into `pool`: from `cache` (the virtual cluster's repository, and corral's own
    repository of a newer Slurm) where it has them, the rest downloaded by apt; a file apt did not bring is an
    error naming it."""
    pool.mkdir(parents=True, exist_ok=True)
    caches = [] if cache is None else [cache] if isinstance(cache, Path) else list(cache)
    for name in files:
        found = next((c / name for c in caches if (c / name).is_file()), None)
        if found is not None and not (pool / name).exists():
            shutil.copy2(found, pool / name)
    if not all((pool / name).is_file() for name in files):
        download_debs(status, packages, pool, work, options)
    missing = [name for name in files if not (pool / name).is_file()]
    if missing:
        raise HostToolError(f"apt did not download {len(missing)} package(s): {', '.join(missing[:5])}",
                            fix="check the build host's apt sources (apt-get update), then build again")
    for extra in sorted(set(p.name for p in pool.iterdir()) - set(files)):
        (pool / extra).unlink()


def paragraphs(index: str) -> list[dict[str, str]]:
    """The stanzas of a Packages index (deb822: Key: value, continuation lines kept)."""
    out, cur, key = [], {}, None
    for line in index.splitlines():
        if not line.strip():
            if cur:
                out.append(cur)
            cur, key = {}, None
        elif line[0] in " \t" and key:
            cur[key] += "\n" + line.strip()
        elif ":" in line:
            key, value = line.split(":", 1)
            cur[key] = value.strip()
    if cur:
        out.append(cur)
    return out


def _names(field: str) -> list[str]:
    """Package names of a Depends/Pre-Depends field: every alternative, no versions or arch qualifiers."""
    names = []
    for alternatives in field.split(","):
        for alt in alternatives.split("|"):
            name = alt.strip().split(" ", 1)[0].split(":", 1)[0].split("(", 1)[0]
            if name:
                names.append(name)
    return names


def reasons(stanzas: list[dict[str, str]], wanted: dict[str, list[str]]) -> dict[str, list[str]]:
    """Package -> why it is in the bundle: the spec's reasons for the packages asked for, and for the rest
    'dependency of X, Y' (the asked-for packages whose dependency closure within the bundle holds it)."""
    provides: dict[str, set[str]] = {}
    deps: dict[str, list[str]] = {}
    for st in stanzas:
        name = st["Package"]
        provides.setdefault(name, set()).add(name)
        for virtual in _names(st.get("Provides", "")):
            provides.setdefault(virtual, set()).add(name)
        deps[name] = _names(st.get("Depends", "") + "," + st.get("Pre-Depends", ""))
    pulled: dict[str, set[str]] = {}
    for root in wanted:
        seen, todo = {root}, [root]
        while todo:
            for dep in deps.get(todo.pop(), []):
                for real in provides.get(dep, ()):
                    if real not in seen:
                        seen.add(real)
                        todo.append(real)
        for name in seen - {root}:
            pulled.setdefault(name, set()).add(root)
    out = {}
    for name in deps:
        if name in wanted:
            out[name] = list(wanted[name])
        else:
            roots = sorted(pulled.get(name, ()))
            out[name] = [f"dependency of {', '.join(roots[:6])}" + (f" and {len(roots) - 6} more" if len(roots) > 6
                                                                    else "")] if roots else ["dependency"]
    return out
