"""A tiny OCI image made on the control host and pushed to a registry over TLS (test scaffolding for
tests/vcluster/images.py): one layer holding Debian's static busybox (its .deb fetched from the
Debian archive the host's apt uses, cached), the image config, the manifest; pushed with the registry
API (blob uploads, then the manifest), trusting only the CA given."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import ssl
import subprocess
import tarfile
from pathlib import Path

CACHE = Path("/var/cache/corral/test-images")
# run on a node: `get(url, accept)` reads from a registry as anyone may, with an anonymous token where it asks for
# one (the site registry: render/registry_auth.py)
ANONYMOUS_GET = r"""
import json, re, urllib.error, urllib.parse, urllib.request
def get(url, accept="*/*"):
    try:
        return urllib.request.urlopen(urllib.request.Request(url, headers={"Accept": accept}), timeout=30).read()
    except urllib.error.HTTPError as e:
        if e.code != 401:
            raise
        p = dict(re.findall(r'(\w+)="([^"]*)"', e.headers["WWW-Authenticate"]))
        q = urllib.parse.urlencode({"service": p["service"], "scope": p.get("scope", "")})
        token = json.loads(urllib.request.urlopen(f"{p['realm']}?{q}", timeout=30).read())["token"]
        req = urllib.request.Request(url, headers={"Accept": accept, "Authorization": "Bearer " + token})
        return urllib.request.urlopen(req, timeout=30).read()
"""
APPLETS = ("sh", "echo", "cat", "id", "hostname", "uname")


def busybox() -> bytes:
    """Debian's static busybox binary (busybox-static, downloaded once)."""
    CACHE.mkdir(parents=True, exist_ok=True)
    binary = CACHE / "busybox"
    if not binary.is_file():
        work = CACHE / "deb"
        work.mkdir(exist_ok=True)
        subprocess.run(["apt-get", "download", "busybox-static"], cwd=work, check=True, capture_output=True)
        deb = next(work.glob("busybox-static_*.deb"))
        subprocess.run(["dpkg-deb", "-x", str(deb), str(work / "root")], check=True)
        binary.write_bytes((work / "root/bin/busybox").read_bytes())
    return binary.read_bytes()


def layer(message: str) -> bytes:
    """An uncompressed layer tar: /bin/busybox, its applets, and /etc/message."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tar:
        def add(name: str, data: bytes | None = None, mode: int = 0o755, link: str | None = None) -> None:
            info = tarfile.TarInfo(name)
            info.mtime, info.mode = 0, mode
            if link is not None:
                info.type, info.linkname = tarfile.SYMTYPE, link
                tar.addfile(info)
            elif data is None:
                info.type = tarfile.DIRTYPE
                tar.addfile(info)
            else:
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
        for d in ("bin", "etc", "tmp"):
            add(d)
        add("bin/busybox", busybox())
        for applet in APPLETS:
            add(f"bin/{applet}", link="busybox")
        add("etc/message", message.encode(), 0o644)
    return out.getvalue()


# a Debian 12 userland with python3 (tests/vcluster/apptainer.py): the OS a container shows (the nodes run Debian 13),
# and what the virtual cluster's stand-in nvidia-smi, a python3 script, needs inside it
PYTHON_PACKAGES = ("base-files", "libc6", "libgcc-s1", "zlib1g", "libexpat1", "python3.11-minimal",
                   "libpython3.11-minimal", "libpython3.11-stdlib", "busybox-static")
PYTHON_LINKS = {"bin/sh": "busybox", "bin/id": "busybox", "usr/bin/python3": "python3.11"}
# what base-passwd's maintainer script would write: a container's own accounts, to which apptainer adds its user's
PYTHON_FILES = {"etc/passwd": "root:x:0:0:root:/root:/bin/sh\n", "etc/group": "root:x:0:\n"}
PYTHON_DROP = ("usr/share/doc", "usr/share/man", "usr/share/locale", "usr/share/info", "usr/lib/x86_64-linux-gnu/gconv")


def python_layer() -> bytes:
    """An uncompressed layer tar of Debian's own packages (the host's release, downloaded once), unpacked as dpkg
    would (no maintainer scripts: the links they would make are PYTHON_LINKS), owned by root, dated 0."""
    import shutil
    import tempfile
    work = CACHE / "python-debs"
    work.mkdir(parents=True, exist_ok=True)
    missing = [p for p in PYTHON_PACKAGES if not list(work.glob(f"{p}_*.deb"))]
    if missing:
        subprocess.run(["apt-get", "download", *missing], cwd=work, check=True, capture_output=True, timeout=300)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for name in PYTHON_PACKAGES:
            subprocess.run(["dpkg-deb", "-x", str(next(work.glob(f"{name}_*.deb"))), tmp], check=True, timeout=120)
        for drop in PYTHON_DROP:
            shutil.rmtree(root / drop, ignore_errors=True)
        for link, target in PYTHON_LINKS.items():
            (root / link).unlink(missing_ok=True)
            (root / link).symlink_to(target)
        for name, text in PYTHON_FILES.items():
            (root / name).write_text(text)
        out = io.BytesIO()
        with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tar:
            for path in sorted(root.rglob("*")):
                info = tar.gettarinfo(str(path), str(path.relative_to(root)))
                info.mtime, info.uid, info.gid, info.uname, info.gname = 0, 0, 0, "root", "root"
                if info.isreg():
                    with open(path, "rb") as f:
                        tar.addfile(info, f)
                else:
                    tar.addfile(info)
    return out.getvalue()


def _digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def push(base_url: str, name: str, tag: str, cafile: Path, message: str,
         credentials: tuple[str, str] | None = None, hosts: dict[str, str] | None = None,
         raw: bytes | None = None, cmd: tuple[str, ...] = ("/bin/sh",)) -> str:
    """Push the image as base_url/name:tag (https, trusting `cafile` alone) with corral's own registry client
    (bundle/image_push.py: a token from the registry's token server, with `credentials`, when it asks for one);
    its manifest digest. `raw`: its one layer (busybox and /etc/message with `message` when None); `cmd`: its
    command (the config's Cmd)."""
    import tempfile

    from corral.bundle.image_push import Registry
    registry = Registry(base_url, ssl.create_default_context(cafile=str(cafile)), timeout=60,
                        credentials=credentials, hosts=hosts)
    raw = layer(message) if raw is None else raw
    blob = gzip.compress(raw, mtime=0)
    config = json.dumps({"architecture": "amd64", "os": "linux", "config": {"Cmd": list(cmd)},
                         "rootfs": {"type": "layers", "diff_ids": [_digest(raw)]}}).encode()
    with tempfile.TemporaryDirectory() as tmp:
        for data in (blob, config):
            path = Path(tmp) / _digest(data).removeprefix("sha256:")
            path.write_bytes(data)
            registry.upload(name, _digest(data), path)
    manifest = json.dumps({
        "schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": _digest(config),
                   "size": len(config)},
        "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", "digest": _digest(blob),
                    "size": len(blob)}]}).encode()
    registry.put_manifest(name, tag, manifest, "application/vnd.oci.image.manifest.v1+json")
    return _digest(manifest)
