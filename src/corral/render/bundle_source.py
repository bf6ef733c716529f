"""The nodes' apt source when packages come from a bundle served by the control host (pure): one list
file, and an apt.conf.d file that makes it apt's only source (Dir::Etc::SourceList and SourceParts moved
to corral's files), so the node's own sources.list and sources.list.d stay as they were, unread, and
come back when the spec goes back to `source: mirror` (the three files removed)."""

from __future__ import annotations

from corral.spec.cluster import Cluster

KEYRING = "/etc/apt/keyrings/corral-bundle.gpg"
LIST = "/etc/apt/corral-bundle.list"
PARTS = "/etc/apt/corral-bundle.list.d"  # empty: no other source part is read
ONLY = "/etc/apt/apt.conf.d/00corral-bundle"


def url(cluster: Cluster) -> str | None:
    p = cluster.spec.packages
    return f"http://{p.serve}/" if p.source == "bundle" and p.serve else None


def source_list(cluster: Cluster) -> str:
    return f"# Managed by corral: the bundle's repository (docs/airgap.md)\ndeb [signed-by={KEYRING}] {url(cluster)} ./\n"


def only_source() -> str:
    return ("# Managed by corral: apt reads only the bundle's source (docs/airgap.md); the node's own\n"
            "# sources.list and sources.list.d are left as they were and come back with this file's removal\n"
            f'Dir::Etc::SourceList "{LIST}";\nDir::Etc::SourceParts "{PARTS}";\n')
