"""Where `corral images` keeps squashfs images and from which nodes it reaches them (pure).

The directory (`--to`, default `<software.root>/images`) must be on a storage.mounts entry that every
login and compute node mounts: users' jobs read it on any compute node. It is root's (0755, like the
software root) and written where root is root: on the node spec/shared.maker names (the cluster's NFS
server, its exported directory; a client's root is squashed). The pull job, as root on a compute node,
writes only into `DIR/.incoming` (0700, owned by the identity the export squashes root to: anonuid,
65534 unless the export says otherwise); the maker then owns the result to root and renames it into
place. Slurm's commands run on the first login node. Each image is `NAME.sqsh` with `NAME.json`."""

from __future__ import annotations

import posixpath
import re
from typing import TYPE_CHECKING

from corral.errors import UsageError
from corral.spec.shared import enclosing_mount, export_of, maker, mount_nodes

if TYPE_CHECKING:
    from corral.spec.cluster import Cluster

NAME = re.compile(r"[a-z0-9][A-Za-z0-9_.+-]{0,254}")  # ImageRef.file_name's alphabet
DIR = re.compile(r"/[A-Za-z0-9_./+-]*")


def image_dir(cluster: Cluster, to: str | None) -> str:
    """The images directory: `to`, else `<software.root>/images`, refused (a UsageError naming it and
    the nodes that lack it) unless every login and compute node mounts it from one spec mount."""
    if to is None:
        if cluster.spec.software is None:
            raise UsageError("--to is needed: the spec has no software: section (whose root holds images/ by "
                             "default)", fix="give --to DIR on shared storage, or add software: {root: /sw}")
        to = posixpath.join(cluster.spec.software.root, "images")
    path = posixpath.normpath(to)
    if not DIR.fullmatch(path) or "/." in path or path == "/":
        raise UsageError("--to: an absolute directory of letters, digits and ._+- (not / itself, no dot-names)",
                         value=to, fix="e.g. --to /sw/images")
    mount = enclosing_mount(cluster, path)
    if mount is None:
        raise UsageError("--to is on no shared mount of storage.mounts: every compute node must read the images",
                         value=to, fix="choose a directory under a storage.mounts path (e.g. the software root)")
    users = [n.name for n in cluster.nodes if "login" in n.roles or "compute" in n.roles]
    missing = [n for n in users if n not in {m.name for m in mount_nodes(cluster, mount)}]
    if missing:
        raise UsageError(f"--to: {', '.join(missing[:5])} do not mount {mount.path}", value=to,
                         fix=f"mount {mount.path} on every login and compute node, or choose another --to")
    return path


def login_node(cluster: Cluster) -> str:
    """The node corral reaches the images through: the first login node (it mounts the directory)."""
    from corral.workflows import batch_job
    return batch_job.first_login(cluster, "images", "it reaches shared storage through it")


def check_name(name: str) -> str:
    """An image's NAME (`nvidia+pytorch+24.01-py3`, as `corral images list` shows it), or a UsageError."""
    if not NAME.fullmatch(name or "") or ".." in name or name.endswith((".sqsh", ".json")):
        raise UsageError("not an image name: letters, digits and _.+- as `corral images list` shows them "
                         "(without .sqsh)", value=name, fix="`corral images list` shows the names")
    return name


def needs_podman(cluster: Cluster) -> None:
    if not cluster.spec.images.podman:
        raise UsageError("images.podman is off: the pull job converts the image with podman on a compute node",
                         where="images.podman", fix="set images: {podman: true} and run corral apply")


def writer(cluster: Cluster, directory: str) -> tuple[str, str]:
    """(node, the directory there) where the images directory is written as root (spec/shared.maker)."""
    found = maker(cluster, directory)
    if found is None:  # image_dir refused such a directory already
        raise UsageError("the images directory is on no spec mount", value=directory)
    return found[0].name, found[1]


def squashed_owner(cluster: Cluster, directory: str) -> str:
    """uid:gid a client's root writes as on the directory's export (its anonuid/anongid, else 65534)."""
    mount = enclosing_mount(cluster, directory)
    export = export_of(cluster, mount) if mount is not None else None
    ids = {"anonuid": "65534", "anongid": "65534"}
    for option in (export.options if export is not None else []):
        key, _, value = str(option).partition("=")
        if key in ids and value.isdigit():
            ids[key] = value
    return f"{ids['anonuid']}:{ids['anongid']}"
