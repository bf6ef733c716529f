"""Debian binary packages of another suite than a release's, for that release's nodes, in a repository of
their own (`repo-trixie/<name>/`, flat, served at `<repo url><name>/`): a newer Slurm (virtual/slurm_more.py),
apptainer (spec/apptainer_source.py); virtual/more_repos.py says which a spec asks for.

They are downloaded by exact version through a private apt configuration of the suite (virtual/apt_release.py:
apt checks each file against the suite's signed index), a dependency the release cannot meet under the same
soname is relaxed in a repack whose version says so (`+corral1`), what they need from the release beyond its
base image is downloaded beside them, and the set is cached: a second call checks the files against its
manifest (sha256) and downloads nothing.
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
from corral.spec.releases import SlurmFrom as FromSuite
from corral.virtual.host import say

DOWNLOAD_TIMEOUT_S = 900
SUFFIX = "+corral1"


def relax(control: str, old: str, new: str) -> str:
    """A binary package's control text with one dependency rewritten and its version marked as corral's."""
    if old not in control:
        raise HostToolError(f"the dependency {old!r} to relax is not in the package's control file",
                            fix="update the row that names the packages (spec/releases.py slurm_more, "
                                "spec/apptainer_source.py) to their dependencies")
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


def ensure(target: Path, what: str, src: FromSuite, apt_work: Path, status: Path, release_options: list[str],
           manifest_name: str, recipe: int) -> Path:
    """`target` holding `src`'s packages (+ libraries, + repacks) and what they need from the release beyond its
    base image (dpkg `status`; the release's apt `release_options`), indexed; cached by a manifest of exactly
    what was asked (`recipe`: what this function does, a change to it fetches the set again). `what` names the
    set in messages."""
    from corral.virtual.apt_release import suite_options
    asked = {"recipe": recipe, "version": src.version, "suite": src.suite, "packages": list(src.packages),
             "libraries": list(src.libraries), "relaxed": {k: list(v) for k, v in src.relaxed.items()}}
    manifest = target / manifest_name
    if manifest.is_file():
        had = json.loads(manifest.read_text())
        if had.get("asked") == asked and had.get("files") == files(target / "pool"):
            return target
    say(f"fetching {what} from debian {src.suite} into {target}")
    shutil.rmtree(target, ignore_errors=True)
    pool = target / "pool"
    pool.mkdir(parents=True)
    opts = suite_options(src.suite, apt_work)
    names = [f"{p}={src.version}" for p in src.packages] + list(src.libraries)
    proc = subprocess.run(["apt-get", "-q", "-o", "Debug::NoLocking=1", *opts, "download", *names], cwd=pool,
                          capture_output=True, text=True, timeout=DOWNLOAD_TIMEOUT_S)
    if proc.returncode != 0:
        tail = " | ".join(proc.stderr.strip().splitlines()[-4:])
        raise HostToolError(f"could not download {what} from debian {src.suite}: {tail}",
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
    manifest.write_text(json.dumps({"asked": asked, "files": files(pool)}, indent=1) + "\n")
    return target


def files(pool: Path) -> dict[str, str]:
    """name -> sha256 of the pool's packages: a cached set is used only as it was made (a file changed or
    missing since, e.g. by a test's broken stand-in left behind, fetches the set again)."""
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(pool.glob("*.deb"))} \
        if pool.is_dir() else {}
