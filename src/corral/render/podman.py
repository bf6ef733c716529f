"""podman on login and compute nodes, rendered (pure): rootless, node-local storage, pulling through the
cluster's registry (docs/components/images.md). Used by deploy/podman.py.

- containers.conf: cgroupfs and a file events log (a job has no systemd user session); on a virtual
  cluster no session keyring (systemd-nspawn's seccomp filter refuses keyctl).
- storage.conf: each user's images under /var/tmp on the node (homes are on NFS, which rootless
  storage cannot use); podman picks its driver (overlay on a node's own disk). On a virtual cluster
  `vfs`: a node's root is an overlayfs, and podman 5 (Debian 13) refuses overlay over overlayfs without a
  FUSE mount program (`'overlay' is not supported over overlayfs`) where podman 4 fell back to vfs.
- registries.conf.d: each cached upstream (nvcr.io, docker.io, ...) pulled through its cache first,
  from the upstream itself when the cache does not answer. The site registry needs nothing: corral's CA is
  in the trust store.
"""

from __future__ import annotations

import json

from corral.render.registry import endpoint
from corral.spec.cluster import Cluster

# uidmap: newuidmap/newgidmap, for the users' subordinate ids; squashfs-tools: mksquashfs in `corral images
# pull`'s job, unsquashfs for reading its images
PACKAGES = ("podman", "uidmap", "squashfs-tools")
CONTAINERS_CONF = "/etc/containers/containers.conf"
STORAGE_CONF = "/etc/containers/storage.conf"
REGISTRIES_CONF = "/etc/containers/registries.conf.d/50-corral-registry.conf"
HEAD = "# Managed by corral (images in cluster.yaml) - do not edit\n"


def containers_conf(cluster: Cluster) -> str:
    keyring = "keyring = false\n" if cluster.spec.virtual is not None else ""
    return (f"{HEAD}[containers]\n{keyring}\n[engine]\ncgroup_manager = \"cgroupfs\"\n"
            "events_logger = \"file\"\n")


def storage_conf(cluster: Cluster) -> str:
    driver = "vfs" if cluster.spec.virtual is not None else ""
    return (f"{HEAD}[storage]\ndriver = \"{driver}\"\nrunroot = \"/run/containers/storage\"\n"
            "graphroot = \"/var/lib/containers/storage\"\n"
            "rootless_storage_path = \"/var/tmp/containers-$UID/storage\"\n")


def registries_conf(cluster: Cluster) -> str:
    """The mirror of every cached upstream: its cache on the registry node (TOML strings as JSON's)."""
    r, out = cluster.spec.images.registry, [HEAD.rstrip()]
    for c in (r.cache if r is not None else []):
        out += ["", "[[registry]]", f"prefix = {json.dumps(c.upstream)}", f"location = {json.dumps(c.upstream)}",
                "[[registry.mirror]]", f"location = {json.dumps(endpoint(cluster, c.port))}"]
    return "\n".join(out) + "\n"
