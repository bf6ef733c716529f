"""images.podman: Debian's podman on login and compute nodes, rootless, pulling through the cluster's
registry; what its files say: render/podman.py. No daemon: each user's podman runs in their job or login shell.
Its per-user storage lives under root's USER_STORE (0711): the prolog makes a job's user's directory
(deploy/jobhooks.py), and a pam_exec hook in the session stack (pam-auth-update's profile) makes it at login."""

from __future__ import annotations

from pyinfra import host
from pyinfra.api import deploy

from corral import paths
from corral.components import gates
from corral.deploy import operations
from corral.deploy.nodestate import Want, register
from corral.engine.conditions import AnyChanged
from corral.engine.shell import cmd
from corral.render.registry_auth import HELPER
from corral.render.podman import (CONTAINERS_CONF, PACKAGES, PAM_PROFILE, REGISTRIES_CONF, STORAGE_CONF, USER_DIRS_CONFIG,
                                  USER_DIRS_HOOK, USER_DIRS_PROGRAM, USER_STORE, containers_conf, login_hook_files,
                                  registries_conf, storage_conf)

HOOK_FILES = (paths.JOBDIRS, USER_DIRS_PROGRAM, USER_DIRS_CONFIG, USER_DIRS_HOOK, PAM_PROFILE)
WANT = register(Want(paths=(CONTAINERS_CONF, STORAGE_CONF, REGISTRIES_CONF, USER_STORE, paths.LIB, *HOOK_FILES,
                            HELPER),
                     packages=PACKAGES))


@deploy("podman")
def podman() -> None:
    node, cluster = host.data.corral_node, host.data.corral_cluster
    if not gates.podman(cluster, node):  # the declaration's gate (components/slurm.py)
        return
    operations.packages(name="podman (rootless)", names=list(PACKAGES), want=WANT, together=True)
    operations.managed_file(name="podman: cgroupfs, events to a file", path=CONTAINERS_CONF,
                            content=containers_conf(cluster), want=WANT)
    operations.managed_file(name="podman: users' images on the node", path=STORAGE_CONF, content=storage_conf(cluster),
                            want=WANT)
    operations.managed_file(name="podman: upstreams through the registry's caches", path=REGISTRIES_CONF,
                            content=registries_conf(cluster), want=WANT)
    from corral.render import registry_auth as ra
    if ra.registries_conf_lines(cluster):  # members of push_group push as themselves
        operations.managed_file(name="podman: corral's credential helper (the site registry)", path=ra.HELPER,
                                content=ra.helper(cluster), mode="755", want=WANT)
    else:
        from corral.deploy.adopt import absent
        absent(name=f"{ra.HELPER} (nobody pushes to the site registry)", path=ra.HELPER, want=WANT)
    # each user's storage: a directory root makes (the prolog, the login hook), never one a user could make first
    operations.directory(name=f"{USER_STORE} (users' podman storage)", path=USER_STORE, mode="711", want=WANT)
    operations.directory(name=paths.LIB, path=paths.LIB, want=WANT)
    written = {path: operations.managed_file(name=path, path=path, content=text, mode=mode, want=WANT)
               for path, (text, mode) in login_hook_files(cluster).items()}
    operations.run_when_changed(name="pam-auth-update (common-session runs the login hook)",
                                _if=AnyChanged(written[PAM_PROFILE]), description="pam-auth-update",
                                commands=[cmd("env", "DEBIAN_FRONTEND=noninteractive", "timeout", "60",
                                              "pam-auth-update", "--package")])
