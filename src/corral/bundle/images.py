"""`corral bundle build --images REF`: each image fetched from its registry on the build host into an OCI
image layout inside the bundle (bundle/oci_layout.py), for linux/amd64 (the bundle's architecture).

The fetch is Debian's skopeo (`skopeo copy docker://REF oci:DIR:TAG`, an argv, never a shell line), one
bounded call per image; it trusts the host's CA store (SSL_CERT_FILE names another, as for any Go
program) and reads registry credentials where skopeo does (`skopeo login`, containers-auth.json). A
reference with a digest is fetched by it (skopeo checks the content against it) and keeps its tag: the
site registry serves the image by the tag. Each reference is typed (spec/image_ref.py) before anything is
fetched."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
from pathlib import Path

from corral.bundle.oci_layout import entry, layout_dir
from corral.errors import CorralError, HostToolError, UsageError
from corral.spec.image_ref import ImageRef, parse

TIMEOUT_S = 3600  # one image: NGC's are ~20 GB
RETRIES = "2"


def refs(texts: list[str]) -> list[ImageRef]:
    """The typed references, or a UsageError naming the bad one: a hostile or digest-only reference, and
    two that would be the same repository and tag in the site registry."""
    out: list[ImageRef] = []
    for text in texts:
        ref = parse(text)
        if not ref.tag:
            raise UsageError("--images: a tag is needed (the site registry serves the image by it); keep a "
                             "digest pin as REF:TAG@sha256:...", value=text)
        clash = next((o for o in out if (o.path, o.tag) == (ref.path, ref.tag)), None)
        if clash is not None:
            raise UsageError(f"--images: {ref} and {clash} would both be {ref.path}:{ref.tag} in the site registry",
                             value=text, fix="carry one of them")
        out.append(ref)
    return out


def source(ref: ImageRef) -> str:
    return f"docker://{ref.registry}/{ref.path}" + (f"@{ref.digest}" if ref.digest else f":{ref.tag}")


def fetch(ref: ImageRef, root: Path, timeout: int = TIMEOUT_S) -> dict:
    """skopeo copies `ref` into root/images/NAME; its manifest entry. A HostToolError naming the image when
    skopeo is missing, fails or runs past `timeout` (what it left is removed)."""
    skopeo = shutil.which("skopeo")
    if skopeo is None:
        raise HostToolError(f"image {ref}: skopeo is not installed on this host",
                            fix="apt-get install skopeo (Debian's), then build the bundle again")
    dest = root / layout_dir(ref)
    dest.parent.mkdir(parents=True, exist_ok=True)
    argv = [skopeo, "--override-os", "linux", "--override-arch", "amd64", "copy", "--quiet", "--retry-times",
            RETRIES, source(ref), f"oci:{dest}:{ref.tag}"]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        _, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:  # the whole group: nothing it started keeps the pipes (or the layout) open
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        shutil.rmtree(dest, ignore_errors=True)
        raise HostToolError(f"image {ref}: skopeo copy did not finish within {timeout} s", value=str(ref)) from None
    if proc.returncode != 0:
        shutil.rmtree(dest, ignore_errors=True)
        said = " | ".join(line.strip() for line in stderr.strip().splitlines()[-3:])
        raise HostToolError(f"image {ref}: skopeo copy failed: {said or f'exit {proc.returncode}'}", value=str(ref),
                            fix="check the reference, this host's access to the registry and its credentials "
                                "(skopeo login REGISTRY)")
    try:
        return entry(ref, root)
    except (CorralError, OSError, ValueError, KeyError, AttributeError) as e:
        shutil.rmtree(dest, ignore_errors=True)
        raise CorralError(f"image {ref}: the layout skopeo wrote is refused ({getattr(e, 'message', e)})",
                          value=str(ref)) from None


def carry(texts: list[str], root: Path, say=lambda msg: None) -> list[dict]:
    """Every image into the bundle's tree at root; their manifest entries (sorted by reference)."""
    out = []
    for ref in refs(texts):
        say(f"fetching image {ref} with skopeo")
        out.append(fetch(ref, root))
        size = sum(b["size"] for b in out[-1]["blobs"])
        say(f"image {ref}: {out[-1]['digest']}, {len(out[-1]['blobs'])} blobs, {size / 1e6:.1f} MB")
    return sorted(out, key=lambda e: e["ref"])


def need_site_registry(cluster, what: str) -> None:
    """A located CorralError unless the spec has a site registry to load carried images into."""
    r = cluster.spec.images.registry
    if r is None or not r.site:
        raise CorralError(f"{what}, but the spec has no site registry to load them into", where="images.registry",
                          fix="add images: {registry: {node: NODE}} (site: true) to the spec, or build the bundle "
                              "without --images")
