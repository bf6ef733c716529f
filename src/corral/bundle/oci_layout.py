"""Container images in a bundle: one OCI image layout per image under `images/<NAME>/` (NAME is the
reference's file name, `nvidia+pytorch+24.01-py3`), each described in the signed manifest (pure).

An entry (manifest.json `images`): ref, repository, tag, the image manifest's digest and media type, the
layout's directory, and every blob (file, sha256, size): the image manifest, its config and its layers.
Nothing in a layout is trusted as it arrives: verification (`problems`) derives each blob's file name
from its recorded sha256 (`<layout>/blobs/sha256/<hex>`, so no name of the bundle's choosing is ever
opened), and checks every blob against the signed SHA256SUMS and its content; the loader reads the image
manifest blob by its recorded digest and pushes only descriptors whose digest the entry lists
(`descriptors`)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from corral.digest import sha256_file
from corral.errors import CorralError
from corral.spec.image_ref import DIGEST, ImageRef, parse

ROOT = "images"
HEX = re.compile(r"[0-9a-f]{64}")
MANIFEST_TYPES = ("application/vnd.oci.image.manifest.v1+json",
                  "application/vnd.docker.distribution.manifest.v2+json")


def layout_dir(ref: ImageRef) -> str:
    return f"{ROOT}/{ref.file_name}"


def blob_file(layout: str, digest: str) -> str:
    """The blob's name in the layout, from a checked `sha256:<hex>` digest only."""
    if not DIGEST.fullmatch(digest or ""):
        raise CorralError(f"not a sha256 digest: {digest!r}")
    return f"{layout}/blobs/sha256/{digest.removeprefix('sha256:')}"


def descriptors(manifest: dict) -> list[dict]:
    """The config's and the layers' descriptors of an image manifest."""
    config, layers = manifest.get("config"), manifest.get("layers")
    if not isinstance(config, dict) or not isinstance(layers, list) or not all(isinstance(x, dict) for x in layers):
        raise CorralError("not an image manifest (no config and layers)")
    return [config, *layers]


def entry(ref: ImageRef, root: Path) -> dict:
    """The manifest entry of the layout skopeo wrote for `ref` under root/images/NAME (one image manifest
    in its index); every digest checked for form and every blob's content against it."""
    layout = layout_dir(ref)
    index = json.loads((root / layout / "index.json").read_text())
    found = index.get("manifests") if isinstance(index, dict) else None
    if not isinstance(found, list) or len(found) != 1 or found[0].get("mediaType") not in MANIFEST_TYPES:
        raise CorralError(f"image {ref}: its layout holds no single image manifest ({json.dumps(found)[:200]})")
    digest = found[0].get("digest", "")
    manifest = json.loads((root / blob_file(layout, digest)).read_bytes())
    blobs = []
    for d in sorted({digest, *(x.get("digest", "") for x in descriptors(manifest))}):
        path = root / blob_file(layout, d)
        if sha256_file(path) != d.removeprefix("sha256:"):
            raise CorralError(f"image {ref}: blob {d} does not hold what its digest says")
        blobs.append({"file": str(path.relative_to(root)), "sha256": d.removeprefix("sha256:"),
                      "size": path.stat().st_size})
    return {"ref": str(ref), "repository": ref.path, "tag": ref.tag, "digest": digest,
            "media_type": found[0]["mediaType"], "layout": layout, "blobs": blobs}


def problems(item: object, listed: dict[str, str], altered: set[str]) -> list[str]:
    """Why a manifest entry of `images` cannot be trusted ([]: it can): `listed` is the signed SHA256SUMS,
    `altered` the files whose content differed from it. Each problem names the image."""
    if not isinstance(item, dict):
        return [f"images: an entry is not an object ({str(item)[:80]!r})"]
    try:
        ref = parse(str(item.get("ref")))
    except CorralError as e:
        return [f"images: {e.message}: {str(item.get('ref'))[:120]!r}"]
    name = f"image {ref}"
    if not ref.tag or item.get("repository") != ref.path or item.get("tag") != ref.tag:
        return [f"{name}: its repository and tag are not the reference's"]
    layout = layout_dir(ref)
    if item.get("layout") != layout:
        return [f"{name}: layout {str(item.get('layout'))[:120]!r} is not {layout} (refused)"]
    if item.get("media_type") not in MANIFEST_TYPES or not DIGEST.fullmatch(str(item.get("digest"))):
        return [f"{name}: not an image manifest of a known type with a sha256 digest"]
    out, hexes = [], set()
    blobs = item.get("blobs")
    for blob in blobs if isinstance(blobs, list) else [None]:
        sha = blob.get("sha256") if isinstance(blob, dict) else None
        if not isinstance(sha, str) or not HEX.fullmatch(sha) or blob.get("file") != blob_file(layout, f"sha256:{sha}"):
            shown = str(blob.get("file") if isinstance(blob, dict) else blob)[:120]
            out.append(f"{name}: blob {shown!r} is not {layout}/blobs/sha256/<its sha256> (refused)")
            continue
        hexes.add(sha)
        if listed.get(blob["file"]) != sha:
            out.append(f"{name}: blob sha256:{sha} is not in SHA256SUMS with that sum")
        elif blob["file"] in altered:
            out.append(f"{name}: blob sha256:{sha} is missing or differs from its digest (altered or truncated)")
    if item["digest"].removeprefix("sha256:") not in hexes:
        out.append(f"{name}: its manifest {item['digest']} is not among its blobs")
    return out
