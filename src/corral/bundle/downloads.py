"""The pinned downloads a bundle carries: enroot's and nvidia-mig-parted's release .debs, pyxis' source,
and gpu-burn's and nccl-tests' sources, each where the spec asks for it (spec/rules_download.py
`downloads`: the same list the spec's checksum rule reads). `corral bundle build` fetches each from its
URL (for amd64, the bundle's architecture), checks it against the spec's sha256 and stores it under
repo/downloads/<key>/ with a canonical name; the nodes then fetch it from the served bundle
(`bundled()`: the spec's URL replaced, the checksum the spec's or, for `sha256: skip`, the one the
signed manifest recorded), never from the original URL."""

from __future__ import annotations

import functools
import hashlib
import ipaddress
import shutil
import tempfile
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from corral.errors import HostToolError
from corral.spec.rules_download import SKIP, downloads

ARCH = "amd64"  # the architecture the bundle resolves for (bundle/build.py Release: amd64 all)
TIMEOUT_S = 300
DEB_NAME, SOURCE_NAME = "{package}_{version}_{arch}.deb", "{key}-{version}.tar.gz"


@dataclass(frozen=True)
class Download:
    key: str          # the spec's key of the tool: nvidia.enroot, acceptance.burn, ...
    package: str | None  # a release .deb's package name; None: a source tarball
    url: str          # where the build host fetches it
    file: str         # its place in the bundle: repo/downloads/<key>/<canonical name>
    sha256: str | None  # the spec's pin; None: `skip` (recorded at build, checked on the nodes from then on)

    @property
    def name(self) -> str:
        return self.file.rsplit("/", 1)[1]


def _tool(cluster, path: tuple):
    obj = cluster.spec
    for part in path:
        obj = getattr(obj, part)
    return obj


def _dir(key: str) -> str:
    return "repo/downloads/" + key.split(".", 1)[1]


def wanted(cluster) -> list[Download]:
    """Every download the spec's nodes make, as the bundle carries it."""
    out = []
    for path, _, sums in downloads(cluster):
        tool, key = _tool(cluster, path[:-1]), ".".join(path[:-1])
        for package in getattr(tool, "packages", None) or [None]:
            if package is None:
                url, name = tool.url.format(version=tool.version), SOURCE_NAME.format(key=path[-2], version=tool.version)
                pin = sums
            else:
                url = tool.url.format(version=tool.version, package=package, arch=ARCH)
                name = DEB_NAME.format(package=package, version=tool.version, arch=ARCH)
                pin = sums.get(package) if isinstance(sums, dict) else None
            out.append(Download(key, package, url, f"{_dir(key)}/{name}", None if pin in (SKIP, None) else pin))
    return out


def fetch_all(cluster, root: Path, say=lambda msg: None) -> list[dict]:
    """Fetch every wanted download into root/<file>, checked against the spec's pin; the manifest entries."""
    entries = []
    for d in wanted(cluster):
        dest = root / d.file
        dest.parent.mkdir(parents=True, exist_ok=True)
        got = _get(d.url, dest)
        if d.sha256 is not None and got != d.sha256:
            dest.unlink()
            raise HostToolError(f"{d.url} ({d.key}) has sha256 {got}, not the spec's {d.sha256}",
                                fix=f"check the download; if the new file is the one wanted, pin it in {d.key}.sha256")
        if d.sha256 is None:
            say(f"{d.key}: {d.name} taken unchecked (sha256: skip); the nodes will check it against the "
                f"bundle's recorded {got[:16]}...")
        entries.append({"key": d.key, "package": d.package, "url": d.url, "file": d.file, "sha256": got,
                        "size": dest.stat().st_size, "why": [d.key]})
    return sorted(entries, key=lambda e: e["file"])


def _get(url: str, dest: Path) -> str:
    h = hashlib.sha256()
    with tempfile.NamedTemporaryFile(dir=dest.parent, prefix=".partial-", delete=False) as tmp:
        try:
            with urllib.request.urlopen(url, timeout=TIMEOUT_S) as r:  # noqa: S310 - https, or http by allow_http
                for block in iter(lambda: r.read(1 << 20), b""):
                    h.update(block)
                    tmp.write(block)
        except (OSError, urllib.error.URLError, ValueError) as e:
            Path(tmp.name).unlink(missing_ok=True)
            raise HostToolError(f"cannot download {url}: {getattr(e, 'reason', e)}",
                                fix="check the URL in the spec and this host's access to it (or its proxy)") from None
    shutil.move(tmp.name, dest)
    return h.hexdigest()


# -- the nodes' side ---------------------------------------------------------------------------------

def served_url(cluster) -> str:
    """Where the nodes reach the bundle's repository: packages.serve, or the virtual cluster's bridge."""
    p, v = cluster.spec.packages, cluster.spec.virtual
    if p.serve:
        return f"http://{p.serve}/"
    subnet = ipaddress.IPv4Network(v.subnet)
    return f"http://{subnet.network_address + 1}:{v.repo_port}/"  # virtual/network.host_address


@functools.lru_cache(maxsize=4)
def _recorded(path: str, mtime_ns: int, size: int) -> dict[str, str]:
    from corral.bundle.coverage import read_manifest
    return {e["file"]: e["sha256"] for e in read_manifest(path).get("downloads", [])}


def recorded(cluster) -> dict[str, str]:
    """bundle file -> sha256, as the bundle's (signed) manifest records them."""
    from corral.bundle.serve import existing_bundle
    path = existing_bundle(cluster)
    st = path.stat()
    return _recorded(str(path), st.st_mtime_ns, st.st_size)


def bundled(cluster, path: tuple):
    """The tool's spec as the nodes use it: unchanged without a bundle; else its URL the bundle's copy and
    its checksum the spec's pin, or the manifest's record where the spec says skip."""
    tool = _tool(cluster, path)
    if cluster.spec.packages.source != "bundle":
        return tool
    key = ".".join(path)
    base, sums = served_url(cluster) + _dir(key).removeprefix("repo/") + "/", recorded(cluster)
    if getattr(tool, "packages", None):
        pins = tool.sha256 if isinstance(tool.sha256, dict) else {}
        have = {p: pins.get(p) or sums.get(f"{_dir(key)}/" + DEB_NAME.format(package=p, version=tool.version,
                                                                             arch=ARCH)) for p in tool.packages}
        return tool.model_copy(update={"url": base + DEB_NAME, "sha256": {p: s for p, s in have.items() if s}})
    name = SOURCE_NAME.format(key=path[-1], version=tool.version)
    pin = tool.sha256 if tool.sha256 not in (SKIP, None) else sums.get(f"{_dir(key)}/{name}")
    return tool.model_copy(update={"url": base + SOURCE_NAME.format(key=path[-1], version="{version}"), "sha256": pin})
