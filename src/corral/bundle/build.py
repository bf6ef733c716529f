"""`corral bundle build`: one tar holding a signed apt repository of everything the spec's nodes install.

Layout (every path relative to the tar's root):
  repo/pool/*.deb, repo/Packages, repo/Packages.gz   the packages (a flat apt repository): Debian's, and
                                                      the vendors' repositories' the spec uses (bundle/vendor.py)
  repo/Release, repo/InRelease                        their index hashes; InRelease clearsigned
  repo/downloads/<tool>/*                             pinned downloads: enroot, pyxis, ... (bundle/downloads.py)
  corral-bundle.gpg                                   the signing key's public part (apt's signed-by=)
  manifest.json                                       what, version, sha256, size, why (bundle/resolve.py);
                                                      serial and valid_until (bundle/serial.py)
  notebook/pyX.Y/*.whl, requirements.txt              (workbench.jupyterhub) the notebook hub's pinned wheels
  easybuild/pyX.Y/*.tar.gz, *.whl, requirements.txt   (software.easybuild) EasyBuild's pinned sdists and wheels
  python/*.whl                                        (--with-python) corral and its dependencies' wheels
  virtual/<image>.tar                                 (--with-virtual) the virtual cluster's base image
  images/<NAME>/                                      (--images REF) an OCI image layout per image (bundle/images.py)
  SHA256SUMS, SHA256SUMS.sig                          every other file's sha256, and its detached signature

The manifest holds no host name and one time: its serial (the build time, in seconds) with the end of
its validity (valid_until, also InRelease's Valid-Until, so apt refuses a replayed old one after it):
the same spec and the same mirror state give the same manifest but for those two. The tar is written with sorted
members, mtime 0 and owner root, next to the output and renamed into place when complete.
"""

from __future__ import annotations

import json
import os
import shutil
import tarfile
import tempfile
import time
from dataclasses import dataclass
from email.utils import formatdate
from pathlib import Path

from corral.bundle import VALID_DAYS, resolve, sign  # noqa: F401 - VALID_DAYS: the CLI's default reads it from bundle/
from corral.digest import sha256_file as sha256
from corral.errors import CorralError, HostToolError
from corral.spec.cluster import Cluster

FORMAT = 2  # 2: serial and valid_until
KEY_FILE, MANIFEST, SUMS = "corral-bundle.gpg", "manifest.json", "SHA256SUMS"
SUITE = "bookworm"  # the release of the clean node the packages are resolved against (virtual/image.py)


@dataclass
class Built:
    path: Path
    fingerprint: str
    packages: int
    size: int
    seconds: float
    downloaded: int  # .debs fetched from the mirror (the rest came from the virtual cluster's cache)
    images: int = 0  # container images carried (--images)

    def to_json(self) -> dict:
        return {"path": str(self.path), "fingerprint": self.fingerprint, "packages": self.packages,
                "size": self.size, "seconds": round(self.seconds, 1), "downloaded": self.downloaded,
                "images": self.images}


def release(repo: Path, name: str, serial: int, valid_until: int, suite: str = SUITE) -> str:
    lines = ["Origin: corral", f"Label: corral bundle {name}", f"Codename: {suite}",
             f"Date: {formatdate(serial, usegmt=True)}", f"Valid-Until: {formatdate(valid_until, usegmt=True)}",
             "Architectures: amd64 all", "SHA256:"]
    for f in ("Packages", "Packages.gz"):
        lines.append(f" {sha256(repo / f)} {(repo / f).stat().st_size} {f}")
    return "\n".join(lines) + "\n"


def requested(cluster: Cluster) -> dict[str, list[str]]:
    """Every apt request the spec's nodes make -> why: the distribution's packages (as real servers install
    them, even from a virtual spec: a bundle is carried to real servers), and those from the vendors'
    repositories ("pkg=version" where the spec pins one; bundle/vendor.py)."""
    from corral.bundle.vendor import requests
    from corral.components.views import package_reasons
    return {**package_reasons(cluster, real=True), **requests(cluster)}


def manifest(cluster: Cluster, index: str, files_dir: Path, suite: str = SUITE) -> dict:
    stanzas = resolve.paragraphs(index)
    asked = requested(cluster)
    why = resolve.reasons(stanzas, {name.split("=", 1)[0]: reasons for name, reasons in asked.items()})
    packages = [{"package": st["Package"], "version": st["Version"], "architecture": st["Architecture"],
                 "file": f"repo/{st['Filename']}", "sha256": st["SHA256"], "size": int(st["Size"]),
                 "why": why.get(st["Package"], [])} for st in stanzas]
    for p in packages:  # dpkg-scanpackages read these files; checked again against the file itself
        if sha256(files_dir / p["file"]) != p["sha256"]:
            raise RuntimeError(f"{p['file']} changed while the bundle was built")
    from corral.render.vendor_repos import vendor_repos
    repos = vendor_repos(cluster)
    extra = {"repositories": [{"name": r.name, "source": r.source, "fingerprint": r.fingerprint, "key": r.spec_key,
                               "packages": sorted(r.packages)} for r in repos]} if repos else {}
    return {"format": FORMAT, "cluster": cluster.spec.name, "distribution": f"debian {suite}", **extra,
            "requested": asked,
            "packages": sorted(packages, key=lambda p: (p["package"], p["version"], p["architecture"]))}


def _tar(root: Path, out: Path) -> None:
    tmp = out.with_name(f".{out.name}.partial")
    try:
        with tarfile.open(tmp, "w", format=tarfile.GNU_FORMAT) as tar:
            for path in sorted(p for p in root.rglob("*") if p.is_file()):
                info = tarfile.TarInfo(str(path.relative_to(root)))
                info.size, info.mtime, info.mode = path.stat().st_size, 0, 0o644
                info.uid = info.gid = 0
                info.uname = info.gname = "root"
                with open(path, "rb") as f:
                    tar.addfile(info, f)
        os.replace(tmp, out)
    finally:
        tmp.unlink(missing_ok=True)


def python_wheels(dest: Path, pins: list[str], source: Path | None) -> list[dict]:
    """corral's own wheel (built from its source) and a wheel of each pinned dependency into dest (`pip
    wheel --no-deps`: the index's wheel for this interpreter and platform, or one built from the sdist where
    there is none, e.g. python-hostlist); their manifest entries. The two pip runs are independent and run
    at once (3 s of a 9 s step on 2 cores)."""
    import sys
    dest.mkdir(parents=True, exist_ok=True)
    pip = [sys.executable, "-I", "-m", "pip", "-q", "--disable-pip-version-check"]
    with tempfile.TemporaryDirectory(prefix="corral-source-") as tmp:
        steps = [("the dependencies' wheels", [*pip, "wheel", "--no-deps", "-w", str(dest), *pins])]
        if source is not None:  # built from a copy: setuptools writes build/ and *.egg-info where it builds
            copy = Path(tmp) / "corral"
            shutil.copytree(source, copy, ignore=shutil.ignore_patterns(
                ".git", ".venv", "build", "*.egg-info", "__pycache__", ".corral", ".pytest_cache", "*.tar"))
            steps.append(("corral's wheel", [*pip, "wheel", "--no-deps", "-w", str(dest), str(copy)]))
        _pip(steps)
    return [{"file": f"python/{w.name}", "sha256": sha256(w), "size": w.stat().st_size}
            for w in sorted(dest.glob("*.whl"))]


def _pip(steps: list[tuple[str, list[str]]]) -> None:
    """Each (what, argv) at once; the first failure, in the steps' order, is raised."""
    import subprocess
    from corral.parallel import pmap

    def one(what_step: tuple[str, list[str]]) -> HostToolError | None:
        what, step = what_step
        try:
            proc = subprocess.run(step, capture_output=True, text=True, timeout=900)
        except subprocess.TimeoutExpired:
            return HostToolError(f"pip wheel ({what}) did not finish within 900 s")
        if proc.returncode != 0:
            said = [line.strip() for line in proc.stderr.splitlines() if "error" in line.lower()]
            return HostToolError(f"pip wheel ({what}) failed: {' | '.join(said[-3:]) or proc.stderr.strip()[-300:]}",
                                 fix="check this host's access to its Python package index")
        return None
    failed = [e for e in pmap(one, steps) if e is not None]
    if failed:
        raise failed[0]


def pack_image(image: Path, root: Path) -> dict:
    """The virtual cluster's base image (a root file system) as virtual/<image name>.tar, owners, modes,
    links and device nodes kept, members sorted; its manifest entry."""
    dest = root / "virtual" / f"{image.name}.tar"
    dest.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(dest, "w", format=tarfile.GNU_FORMAT) as tar:
        for path in [image, *sorted(image.rglob("*"))]:
            tar.add(path, arcname=str(path.relative_to(image)), recursive=False)
    marker = (image / "etc/corral-image").read_text().strip()
    return {"image": image.name, "recipe": json.loads(marker), "file": f"virtual/{dest.name}",
            "sha256": sha256(dest), "size": dest.stat().st_size}


def seal(root: Path, name: str, content: dict, home: Path, fpr: str, out: Path,
         valid_days: int = VALID_DAYS) -> None:
    """root/repo (pool and Packages made) -> Release and InRelease, the public key, the manifest (with its
    serial and valid_until), SHA256SUMS and its signature, then the tar at `out`."""
    repo = root / "repo"
    serial = int(time.time())
    content = {**content, "format": FORMAT, "serial": serial, "valid_until": serial + valid_days * 86400}
    rel = release(repo, name, serial, content["valid_until"], content["distribution"].split()[-1])
    (repo / "Release").write_text(rel)
    (repo / "InRelease").write_bytes(sign.sign(home, fpr, rel.encode(), clear=True))
    (root / KEY_FILE).write_bytes(sign.export_public(home, fpr))
    (root / MANIFEST).write_text(json.dumps(content, indent=1, sort_keys=True) + "\n")
    sums = "".join(f"{sha256(p)}  {p.relative_to(root)}\n" for p in sorted(root.rglob("*")) if p.is_file())
    (root / SUMS).write_text(sums)
    (root / f"{SUMS}.sig").write_bytes(sign.sign(home, fpr, sums.encode(), clear=False))
    _tar(root, out)


def refuse(cluster: Cluster, images: list[str] | None = None) -> None:
    """What a bundle of this spec cannot be, as a CorralError before anything is fetched or made (corral bundle
    build asks before it prepares the release's node image and sources)."""
    from corral.bundle import images as carried_images
    from corral.render.vendor_repos import vendor_repos
    from corral.spec.rules_bundle import VENDOR_RELEASE, bundle_os, unbundled, why_unbundled
    carried_images.refs(images or [])  # every reference typed before anything is fetched
    if images:
        carried_images.need_site_registry(cluster, f"--images: {len(images)} image(s) to carry; nothing was built")
    others = unbundled(cluster)
    if others:
        i, os_name = others[0][0], others[0][1].os
        raise CorralError(f"{cluster.path}: nodes[{i}].os: {os_name}: {why_unbundled(cluster, os_name)}; nothing "
                          "was built", fix=f"install {os_name} nodes from the distribution's mirror "
                                           "(packages.source: mirror), or give every node one release")
    needed = vendor_repos(cluster) if bundle_os(cluster) != VENDOR_RELEASE else []
    if needed:
        r = needed[0]
        raise CorralError(f"{cluster.path}: {r.spec_key}: {r.name} ({', '.join(sorted(r.packages))}) is carried for "
                          f"{VENDOR_RELEASE} bundles only; nothing was built",
                          fix="leave out what the spec takes from it, or install from the mirrors")


def build(cluster: Cluster, out: Path, status: Path, cache: Path | None = None, say=lambda msg: None,
          python: tuple[list[str], Path | None] | None = None, image: Path | None = None,
          valid_days: int = VALID_DAYS, sources: tuple | None = None, images: list[str] | None = None) -> Built:
    """`status`: the dpkg status of a clean node of the release (the virtual cluster's base image);
    `cache`: a pool of .debs to take files from before downloading (the virtual cluster's repository);
    `python`: (pinned requirements, corral's source directory) for the control host's wheels;
    `image`: the virtual cluster's base image directory, to carry (--with-virtual);
    `valid_days`: how long the nodes' apt accepts its InRelease (Valid-Until);
    `sources`: (release, apt options, more pools) of the spec's release (workflows/bundle_sources.py); None:
    the control host's own sources, for a Debian 12 spec;
    `images`: container image references to carry (for the site registry: workflows/images_load.py)."""
    from corral.bundle.vendor import apt_options
    from corral.render.vendor_repos import vendor_repos
    from corral.spec.releases import release
    from corral.spec.workbench import hub_node
    from corral.workbench_wheels import CACHE as cache_root, carry
    from corral.spec.rules_bundle import bundle_os
    from corral.bundle import images as carried_images
    refuse(cluster, images)
    if sources is None:
        if release(bundle_os(cluster)).suite != SUITE:
            raise CorralError(f"{cluster.path}: a {bundle_os(cluster)} bundle is resolved from its release's archive, "
                              "which this call was not given; nothing was built", fix="use corral bundle build")
        sources = (release(bundle_os(cluster)), [], [])
    start, out = time.monotonic(), Path(out).resolve()  # apt reads relative Dir:: paths under its own dirs
    home, fpr = sign.ensure_key(cluster.state_dir, cluster.spec.name)
    wanted, repos = list(requested(cluster)), vendor_repos(cluster)
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".corral-bundle-", dir=out.parent) as tmp:
        root, work = Path(tmp) / "bundle", Path(tmp) / "apt"
        repo = root / "repo"
        rel, options, pools = sources
        for r in repos:
            say(f"adding {r.name} {r.source.split()[0]} (key {r.fingerprint}) for {', '.join(sorted(r.packages))}")
        if repos:  # debian-12 alone (vendor_gaps above): the host's own sources plus the vendors'
            options = apt_options(repos, Path(tmp) / "vendors")
        say(f"resolving for debian {rel.suite} ({rel.name})")
        files = resolve.resolve(status, wanted, work, options)
        caches = [c for c in ([cache] if cache is not None else []) + pools if c.is_dir()]
        have = {f for f in files if any((c / f).is_file() for c in caches)}
        say(f"{len(files)} packages for {len(wanted)} asked for; {len(files) - len(have)} to download")
        resolve.fetch(files, wanted, status, repo / "pool", work, caches, options)
        text = resolve.index(repo)
        content = manifest(cluster, text, root, rel.suite)
        from corral.bundle.downloads import fetch_all, wanted
        if wanted(cluster):
            say(f"fetching {len(wanted(cluster))} pinned download(s): "
                + ", ".join(sorted({d.key for d in wanted(cluster)})))
            content["downloads"] = fetch_all(cluster, root, say)
        hub = hub_node(cluster)
        if hub is not None and cluster.spec.software is not None:  # workbench.jupyterhub: its pinned wheels
            py = release(hub.os).python
            say(f"adding the notebook hub's pinned wheels for Python {py}")
            content["notebook"] = carry(py, cache_root, root / "notebook" / f"py{py}")
        if cluster.spec.software is not None and cluster.spec.software.easybuild is not None:  # EasyBuild's files
            from corral.spec.easybuild import python_of
            from corral.workbench_wheels import EASYBUILD
            py = python_of(cluster)
            say(f"adding EasyBuild's pinned files for Python {py}")
            content["easybuild"] = carry(py, cache_root, root / "easybuild" / f"py{py}", EASYBUILD)
        if python is not None:
            say(f"downloading {len(python[0])} Python wheels for the control host, building corral's")
            content["python"] = python_wheels(root / "python", *python)
        if image is not None:
            say(f"adding the virtual cluster's base image {image.name}")
            content["virtual"] = pack_image(image, root)
        if images:
            content["images"] = carried_images.carry(images, root, say)
        seal(root, cluster.spec.name, content, home, fpr, out, valid_days)
        shutil.rmtree(work, ignore_errors=True)
    return Built(out, fpr, len(files), out.stat().st_size, time.monotonic() - start, len(files) - len(have),
                 len(images or []))
