"""podman on login and compute nodes, rendered (pure): rootless, node-local storage, pulling through the
cluster's registry (docs/components/images.md). Declared as data (`resources`, render/resources.py): the one
generic deploy applies it, `corral render` writes its files, its packages go to the bundle, all from that list.

- containers.conf: cgroupfs and a file events log (a job has no systemd user session); on a virtual
  cluster no session keyring (systemd-nspawn's seccomp filter refuses keyctl).
- storage.conf: each user's images under USER_STORE/UID on the node (homes are on NFS, which rootless storage
  cannot use); podman picks its driver (overlay on a node's own disk). USER_STORE is root's (0711), so only root
  makes a user's directory: the prolog for a job's user, and at login (pam_exec, node/userdirs.py) on login nodes.
  A directory per user in /var/tmp could be made first by another user, who then owned the victim's image store
  (security review 3, N6). On a virtual cluster
  `vfs`: a node's root is an overlayfs, and podman 5 (Debian 13) refuses overlay over overlayfs without a
  FUSE mount program (`'overlay' is not supported over overlayfs`) where podman 4 fell back to vfs.
- registries.conf.d: each cached upstream (nvcr.io, docker.io, ...) pulled through its cache first,
  from the upstream itself when the cache does not answer. The site registry's TLS needs nothing (corral's CA is
  in the trust store); where `push_group` is set, corral's credential helper gives its members' podman a MUNGE
  credential for it (render/registry_auth.py).
"""

from __future__ import annotations

import json

from corral import paths
from corral.render.registry import endpoint
from corral.spec.cluster import Cluster

# uidmap: newuidmap/newgidmap, for the users' subordinate ids; squashfs-tools: mksquashfs in `corral images
# pull`'s job, unsquashfs for reading its images
PACKAGES = ("podman", "uidmap", "squashfs-tools")
CONTAINERS_CONF = "/etc/containers/containers.conf"
USER_STORE = "/var/lib/corral-podman"  # root 0711; USER_STORE/UID 0700, the user's
USER_DIRS_CONFIG = "/etc/corral/user-dirs.json"  # node/userdirs.py reads it at login
USER_DIRS_PROGRAM = f"{paths.LIB}/userdirs.py"
USER_DIRS_HOOK = f"{paths.SBIN}/corral-user-dirs"
PAM_PROFILE_NAME = "corral-user-dirs"
PAM_PROFILE = f"/usr/share/pam-configs/{PAM_PROFILE_NAME}"
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
            f"rootless_storage_path = \"{USER_STORE}/$UID/storage\"\n")


def user_dirs(cluster: Cluster) -> list[dict]:
    """The per-user directories podman needs (the prolog's and the login hook's template, jobdirs.py)."""
    return [{"path": USER_STORE + "/{uid}", "clean": False, "shared": False}] if cluster.spec.images.podman else []


def user_dirs_config(cluster: Cluster) -> str:
    return json.dumps({"user_dirs": user_dirs(cluster)}, indent=1, sort_keys=True) + "\n"


HOOK_TEXT = (f"#!/bin/sh\n# Managed by corral: a user's node-local directories, made at login (pam_exec)\n"
             f"exec /usr/bin/python3 -I {USER_DIRS_PROGRAM}\n")
# pam-auth-update's profile: common-session runs the hook, as root, for every login (a failure never blocks one)
PAM_PROFILE_TEXT = ("Name: corral: each user's node-local directories (podman's storage), made at login\n"
                    "Default: yes\nPriority: 0\nSession-Type: Additional\nSession:\n"
                    f"\toptional\tpam_exec.so quiet {USER_DIRS_HOOK}\n")


def login_hook_files(cluster: Cluster) -> dict[str, tuple[str, str]]:
    """The login hook's files: path -> (text, mode)."""
    from corral.render.node_programs import node_program
    return {paths.JOBDIRS: (node_program("jobdirs.py"), "644"), USER_DIRS_PROGRAM: (node_program("userdirs.py"), "644"),
            USER_DIRS_CONFIG: (user_dirs_config(cluster), "644"), USER_DIRS_HOOK: (HOOK_TEXT, "755"),
            PAM_PROFILE: (PAM_PROFILE_TEXT, "644")}


def registries_conf(cluster: Cluster) -> str:
    """The mirror of every cached upstream: its cache on the registry node (TOML strings as JSON's); where users
    may push, corral's credential helper after the users' own logins (render/registry_auth.py)."""
    from corral.render.registry_auth import registries_conf_lines
    r, out = cluster.spec.images.registry, [HEAD.rstrip(), *registries_conf_lines(cluster)]
    for c in (r.cache if r is not None else []):
        out += ["", "[[registry]]", f"prefix = {json.dumps(c.upstream)}", f"location = {json.dumps(c.upstream)}",
                "[[registry.mirror]]", f"location = {json.dumps(endpoint(cluster, c.port))}"]
    return "\n".join(out) + "\n"


PAM_UPDATE = ("env", "DEBIAN_FRONTEND=noninteractive", "timeout", "60", "pam-auth-update", "--package")


def resources(cluster: Cluster, node) -> list:
    """What podman's component installs on a node (components/slurm.py gates it: login and compute nodes)."""
    from corral.render import resources as r
    from corral.render import registry_auth as ra
    helper = (r.File(ra.HELPER, ra.helper(cluster), "podman: corral's credential helper (the site registry)",
                     mode="755") if ra.registries_conf_lines(cluster)  # members of push_group push as themselves
              else r.Absent(ra.HELPER, f"{ra.HELPER} (nobody pushes to the site registry)"))
    return [
        r.Packages(PACKAGES, "podman (rootless)", "images.podman (squashfs-tools: corral images pull)"),
        r.File(CONTAINERS_CONF, containers_conf(cluster), "podman: cgroupfs, events to a file"),
        r.File(STORAGE_CONF, storage_conf(cluster), "podman: users' images on the node"),
        r.File(REGISTRIES_CONF, registries_conf(cluster), "podman: upstreams through the registry's caches"),
        helper,
        # each user's storage: a directory root makes (the prolog, the login hook), never one a user could make first
        r.Directory(USER_STORE, f"{USER_STORE} (users' podman storage)", mode="711"),
        r.Directory(paths.LIB),
        *(r.File(path, text, mode=mode) for path, (text, mode) in login_hook_files(cluster).items()),
        r.OnChange("pam-auth-update (common-session runs the login hook)", "pam-auth-update", (PAM_PROFILE,),
                   (PAM_UPDATE,)),
    ]
