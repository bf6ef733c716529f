"""images.podman: Debian's podman on login and compute nodes, rootless, pulling through the cluster's
registry; what its files say: render/podman.py. No daemon: each user's podman runs in their job."""

from __future__ import annotations

from pyinfra import host
from pyinfra.api import deploy

from corral.components import gates
from corral.deploy import operations
from corral.deploy.nodestate import Want, register
from corral.render.podman import (CONTAINERS_CONF, PACKAGES, REGISTRIES_CONF, STORAGE_CONF, containers_conf,
                                  registries_conf, storage_conf)

WANT = register(Want(paths=(CONTAINERS_CONF, STORAGE_CONF, REGISTRIES_CONF), packages=PACKAGES))


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
