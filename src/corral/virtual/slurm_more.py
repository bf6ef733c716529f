"""A Slurm major newer than a release's archive ships, for that release's virtual nodes (spec/releases.py
`slurm_more`): Debian 13 ships 24.11; `slurm.version: 26.05` gets Debian unstable's 26.05 binaries.

They go into a repository of their own beside the release's (`repo-trixie/slurm-26.05/`, flat, served at
`<repo url>slurm-26.05/`), never into the release's pool: a node is given it (one more sources line,
virtual/node.py) only on a cluster whose spec asks for that major, so every other cluster of the release
installs exactly what it did. The packages are downloaded by exact version through a private apt
configuration of the suite (virtual/apt_release.py; apt checks each file against the suite's signed
index), a dependency the release cannot meet under the same soname is relaxed in a repack whose version
says so (`+corral1`), and the set is cached: a second call checks the files against its manifest (sha256)
and downloads nothing.

Why not built from source here: the source package of 26.05 (`deb-src` of unstable) is listed in the
suite's index but its files are not served by the archive mirror this machine reaches (404); the binary
packages are. A site builds or mirrors its own; the docs say so.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import tempfile
from pathlib import Path

from corral.bundle.resolve import index
from corral.errors import HostToolError
from corral.spec.releases import Release, SlurmFrom
from corral.virtual.host import say

MANIFEST = "corral-slurm.json"
DOWNLOAD_TIMEOUT_S = 900
SUFFIX = "+corral1"
RECIPE = 2  # what ensure() does: a change to it refetches the cached set


def wanted(release: Release, version: str | None) -> tuple[str, SlurmFrom] | None:
    """(major, where from) when `version` (the spec's slurm.version) is a major `release` gets elsewhere."""
    if not version:
        return None
    major = ".".join(version.split(".")[:2])
    found = release.slurm_more.get(major)
    return (major, found) if found is not None else None


def subdir(major: str) -> str:
    return f"slurm-{major}"


def relax(control: str, old: str, new: str) -> str:
    """A binary package's control text with one dependency rewritten and its version marked as corral's."""
    if old not in control:
        raise HostToolError(f"the dependency {old!r} to relax is not in the package's control file",
                            fix="update spec/releases.py slurm_more to the packages' dependencies")
    lines = []
    for line in control.replace(old, new).splitlines():
        lines.append(line + SUFFIX if line.startswith("Version: ") else line)
    return "\n".join(lines) + "\n"


def _repack(deb: Path, old: str, new: str) -> Path:
    with tempfile.TemporaryDirectory(prefix="corral-repack-") as tmp:
        root = Path(tmp) / "root"
        subprocess.run(["dpkg-deb", "-R", str(deb), str(root)], check=True, capture_output=True, timeout=300)
        control = root / "DEBIAN/control"
        control.write_text(relax(control.read_text(), old, new))
        out = deb.with_name(deb.name.replace(f"_{deb.name.split('_')[1]}_",
                                             f"_{deb.name.split('_')[1]}{SUFFIX}_"))
        subprocess.run(["dpkg-deb", "--root-owner-group", "-b", str(root), str(out)], check=True,
                       capture_output=True, timeout=300)
    deb.unlink()
    return out


def depends(debs: list[Path]) -> list[str]:
    """The packages `debs` depend on (each dependency's first alternative), less those among them."""
    ours, out = set(), []
    for deb in debs:
        ours.add(deb.name.split("_")[0])
        text = subprocess.run(["dpkg-deb", "-f", str(deb), "Depends", "Pre-Depends"], capture_output=True,
                              text=True, timeout=60, check=True).stdout
        for line in text.splitlines():
            for dep in line.split(":", 1)[-1].split(","):
                name = dep.split("|")[0].split("(")[0].strip().split(":")[0]
                if name and name not in out:
                    out.append(name)
    return [n for n in out if n not in ours]


def ensure(repo: Path, major: str, src: SlurmFrom, apt_work: Path, status: Path, release_options: list[str]) -> Path:
    """`repo`/slurm-MAJOR holding `src`'s packages (+ libraries, + repacks) and what they need from the
    release beyond its base image (dpkg `status`; the release's apt `release_options`), indexed; cached by
    a manifest of exactly what was asked."""
    from corral.virtual.apt_release import suite_options
    target = repo / subdir(major)
    asked = {"recipe": RECIPE, "version": src.version, "suite": src.suite, "packages": list(src.packages),
             "libraries": list(src.libraries), "relaxed": {k: list(v) for k, v in src.relaxed.items()}}
    manifest = target / MANIFEST
    if manifest.is_file():
        had = json.loads(manifest.read_text())
        if had.get("asked") == asked and had.get("files") == _files(target / "pool"):
            return target
    say(f"fetching Slurm {src.version} from debian {src.suite} into {target}")
    shutil.rmtree(target, ignore_errors=True)
    pool = target / "pool"
    pool.mkdir(parents=True)
    opts = suite_options(src.suite, apt_work)
    names = [f"{p}={src.version}" for p in src.packages] + list(src.libraries)
    proc = subprocess.run(["apt-get", "-q", "-o", "Debug::NoLocking=1", *opts, "download", *names], cwd=pool,
                          capture_output=True, text=True, timeout=DOWNLOAD_TIMEOUT_S)
    if proc.returncode != 0:
        tail = " | ".join(proc.stderr.strip().splitlines()[-4:])
        raise HostToolError(f"could not download Slurm {src.version} from debian {src.suite}: {tail}",
                            fix="check that the Debian mirror serves the suite (CORRAL_DEBIAN_MIRROR to choose one)")
    for package, (old, new) in src.relaxed.items():
        debs = sorted(pool.glob(f"{package}_*.deb"))
        if len(debs) != 1:
            raise HostToolError(f"expected one {package} package in {pool}, found {len(debs)}")
        _repack(debs[0], old, new)
    from corral.bundle.resolve import download_debs
    download_debs(status, depends(sorted(pool.glob("*.deb"))), pool, target / "aptstate", release_options)
    shutil.rmtree(target / "aptstate", ignore_errors=True)
    index(target)
    manifest.write_text(json.dumps({"asked": asked, "files": _files(pool)}, indent=1) + "\n")
    return target


def _files(pool: Path) -> dict[str, str]:
    """name -> sha256 of the pool's packages: a cached set is used only as it was made (a file changed or
    missing since, e.g. by a test's broken stand-in left behind, fetches the set again)."""
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(pool.glob("*.deb"))} \
        if pool.is_dir() else {}
