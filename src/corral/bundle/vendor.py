"""Packages from the vendors' apt repositories in a bundle (render/vendor_repos.py: NVIDIA's CUDA
repository, NVIDIA's container toolkit repository, Grafana's), where the spec asks for them.

At build time each repository is added to a private apt configuration, beside the build host's own
sources and never in them: its signing key is fetched (cuda-keyring's keyring, or the key file) and
must hold exactly the pinned key (the vendor's, or the spec's fingerprint for a site's re-signed
mirror; the deploys check the same on nodes), apt refreshes those sources into a private lists
directory (the host's lists are linked in, not copied or changed), and the spec's packages are resolved
against everything together with the versions held as the nodes hold them (the repositories' apt
preferences). The .debs then sit in the bundle's one signed repository like every other package.
"""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
from pathlib import Path

from corral.errors import HostToolError
from corral.render.vendor_repos import VendorRepo, vendor_repos

APT_TIMEOUT_S = 600


def requests(cluster) -> dict[str, list[str]]:
    """Every apt request the spec's nodes make of a vendor repository -> why."""
    out: dict[str, list[str]] = {}
    for repo in vendor_repos(cluster):
        out.update(repo.packages)
    return out


def fetch_key(repo: VendorRepo, dest: Path) -> Path:
    """The repository's signing key at dest/<n>.gpg (or .asc), refused unless it holds exactly the pinned key."""
    from corral.bundle.downloads import _get
    dest.mkdir(parents=True, exist_ok=True)
    got = dest / ("download.deb" if repo.keyring_deb else "download.key")
    _get(repo.key_url, got)
    data, suffix = got.read_bytes(), ".asc" if got.read_bytes().lstrip().startswith(b"-----BEGIN") else ".gpg"
    if repo.keyring_deb:
        with tempfile.TemporaryDirectory(prefix="corral-keyring-") as tmp:
            x = subprocess.run(["dpkg-deb", "-x", str(got), tmp], capture_output=True, text=True, timeout=60)
            rings = sorted(Path(tmp, "usr/share/keyrings").glob("*.gpg")) if x.returncode == 0 else []
            if not rings:
                raise HostToolError(f"{repo.key_url} is not a cuda-keyring package (no /usr/share/keyrings/*.gpg"
                                    f"{': ' + x.stderr.strip()[-160:] if x.returncode else ''})",
                                    fix=f"check {repo.spec_key}: it must point at {repo.name} or a mirror of it")
            data, suffix = b"".join(r.read_bytes() for r in rings), ".gpg"
    got.unlink()
    from corral.bundle.sign import primary_fingerprints
    primaries = primary_fingerprints(data)
    if primaries != [repo.fingerprint]:
        raise HostToolError(f"{repo.key_url}: its key is {', '.join(primaries) or 'not an OpenPGP key'}, not exactly "
                            f"{repo.name}'s key {repo.fingerprint}; nothing was taken from that repository",
                            value=repo.key_url,
                            fix="for the vendor's own repository this means the download was altered; for a site's "
                                f"mirror set the fingerprint of its signing key in the spec ({repo.spec_key}'s section)")
    ring = dest / f"{len(list(dest.iterdir()))}{suffix}"
    ring.write_bytes(data)
    return ring


def apt_options(repos: list[VendorRepo], work: Path) -> list[str]:
    """Fetch and check each repository's key, refresh their sources into a private lists directory holding
    links to the host's lists, and return the apt options that resolve against the host's sources plus these."""
    work = work.resolve()
    parts, only, lists = work / "sources.list.d", work / "vendors-only.d", work / "lists"
    for d in (parts, only, lists / "partial"):
        d.mkdir(parents=True, exist_ok=True)
    lines = "".join(f"deb [signed-by={fetch_key(r, work / 'keyrings')}] {r.source}\n" for r in repos)
    (only / "vendors.list").write_text(lines)
    host_parts = Path("/etc/apt/sources.list.d")
    for f in sorted(host_parts.glob("*")) if host_parts.is_dir() else []:
        if f.suffix in (".list", ".sources") and not (parts / f.name).exists():
            (parts / f.name).symlink_to(f)
    (parts / "zz-corral-vendors.list").write_text(lines)
    for f in sorted(Path("/var/lib/apt/lists").glob("*")):
        if f.is_file() and f.name != "lock" and not (lists / f.name).exists():
            (lists / f.name).symlink_to(f)
    (work / "preferences").write_text("\n".join(r.pin for r in repos if r.pin))
    (work / "empty.list").write_text("")
    common = ["-o", f"Dir::State::Lists={lists}", "-o", "APT::Sandbox::User=root",  # a private dir _apt cannot read
              "-o", "Dir::Cache::pkgcache=", "-o", "Dir::Cache::srcpkgcache=",
              "-o", f"Dir::Etc::preferences={work / 'preferences'}",
              "-o", f"Dir::Etc::PreferencesParts={only}"]  # no .pref files there: the host's are not read
    update = ["apt-get", "-q", "-o", f"Dir::Etc::SourceList={work / 'empty.list'}",
              "-o", f"Dir::Etc::SourceParts={only}", "-o", "APT::Get::List-Cleanup=false", *common, "update"]
    try:
        proc = subprocess.run(update, capture_output=True, text=True, timeout=APT_TIMEOUT_S,
                              env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"})
    except subprocess.TimeoutExpired:
        raise HostToolError(f"apt-get update of the vendors' repositories did not finish within {APT_TIMEOUT_S} s") \
            from None
    said = proc.stdout + proc.stderr
    if proc.returncode != 0 or re.search(r"^(E:|W: (GPG|The repository|Failed))", said, re.M):
        tail = " | ".join(line for line in said.strip().splitlines()[-4:])
        raise HostToolError(f"apt cannot read {', '.join(r.name + ' ' + r.source.split()[0] for r in repos)}: {tail}",
                            fix="check the repositories' URLs in the spec and this host's access to them; a signature "
                                "error means a repository is not signed by its pinned key")
    return [*common, "-o", f"Dir::Etc::SourceParts={parts}"]
