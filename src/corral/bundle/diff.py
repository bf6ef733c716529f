"""`corral bundle diff A B`: what changed between two bundles' manifests, for change review: packages
added, removed, or at another version (with their reasons), the asked-for set, and the container images
carried (`--images`: added, removed, or at another digest, by the site registry's repository:tag)."""

from __future__ import annotations


def _by_name(manifest: dict) -> dict[str, dict]:
    return {p["package"]: p for p in manifest.get("packages", [])}


def _images(manifest: dict) -> dict[str, dict]:
    items = manifest.get("images")
    return {f"{i.get('repository')}:{i.get('tag')}": i for i in items if isinstance(i, dict)} \
        if isinstance(items, list) else {}


def image_diff(a: dict, b: dict) -> dict:
    old, new = _images(a), _images(b)
    return {"added": [{"image": n, "ref": new[n].get("ref"), "digest": new[n].get("digest")}
                      for n in sorted(set(new) - set(old))],
            "removed": [{"image": n, "digest": old[n].get("digest")} for n in sorted(set(old) - set(new))],
            "changed": [{"image": n, "from": old[n].get("digest"), "to": new[n].get("digest")}
                        for n in sorted(set(old) & set(new)) if old[n].get("digest") != new[n].get("digest")]}


def diff(a: dict, b: dict) -> dict:
    old, new = _by_name(a), _by_name(b)
    images = image_diff(a, b)
    changed = [{"package": n, "from": old[n]["version"], "to": new[n]["version"], "why": new[n].get("why", [])}
               for n in sorted(set(old) & set(new))
               if (old[n]["version"], old[n]["sha256"]) != (new[n]["version"], new[n]["sha256"])]
    return {
        "added": [{"package": n, "version": new[n]["version"], "why": new[n].get("why", [])}
                  for n in sorted(set(new) - set(old))],
        "removed": [{"package": n, "version": old[n]["version"]} for n in sorted(set(old) - set(new))],
        "changed": changed,
        "requested_added": sorted(set(b.get("requested", {})) - set(a.get("requested", {}))),
        "requested_removed": sorted(set(a.get("requested", {})) - set(b.get("requested", {}))),
        "images": images,
        "same": not (set(old) ^ set(new)) and not changed and not any(images.values()),
    }


def lines(d: dict) -> list[str]:
    out = [f"+ {p['package']} {p['version']}  ({'; '.join(p['why'])})" for p in d["added"]]
    out += [f"- {p['package']} {p['version']}" for p in d["removed"]]
    out += [f"~ {p['package']} {p['from']} -> {p['to']}" + ("  (same version, other file)" if p["from"] == p["to"]
                                                             else "") for p in d["changed"]]
    images = d.get("images", {})
    out += [f"+ image {i['image']} {i['digest']}  (from {i['ref']})" for i in images.get("added", [])]
    out += [f"- image {i['image']} {i['digest']}" for i in images.get("removed", [])]
    out += [f"~ image {i['image']} {i['from']} -> {i['to']}" for i in images.get("changed", [])]
    return out or ["no change in packages or images"]
