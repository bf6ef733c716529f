"""`corral bundle diff A B`: what changed between two bundles' manifests, for change review: packages
added, removed, or at another version (with their reasons), and the asked-for set."""

from __future__ import annotations


def _by_name(manifest: dict) -> dict[str, dict]:
    return {p["package"]: p for p in manifest.get("packages", [])}


def diff(a: dict, b: dict) -> dict:
    old, new = _by_name(a), _by_name(b)
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
        "same": not (set(old) ^ set(new)) and not changed,
    }


def lines(d: dict) -> list[str]:
    out = [f"+ {p['package']} {p['version']}  ({'; '.join(p['why'])})" for p in d["added"]]
    out += [f"- {p['package']} {p['version']}" for p in d["removed"]]
    out += [f"~ {p['package']} {p['from']} -> {p['to']}" + ("  (same version, other file)" if p["from"] == p["to"]
                                                             else "") for p in d["changed"]]
    return out or ["no change in packages"]
