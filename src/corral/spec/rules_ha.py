"""Cross-field checks of Slurm high availability (pure, before any SSH): slurmctld's StateSaveLocation
(`slurm.state_save_location`). With two controllers (primary and backup) it must be on a spec mount
that both mount, or the backup takes over with an empty queue; on any spec mount, every controller
must mount it (slurmctld would otherwise write to the local disk under the mount point). It may not be
a system directory (the deploy makes it owned by slurm). A state served by the cluster's own nfs node
that is also a controller is allowed, and warned about."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from corral.errors import Problem
from corral.spec.rules_storage import EXACT, SYSTEM
from corral.spec.shared import mount_nodes, nfs_server, state_mount, state_save_location, under

if TYPE_CHECKING:
    from corral.spec.cluster import Cluster

Where = Callable[..., str]
STATE_PARENTS = ("/var/lib/slurm", "/var/spool")  # system directories a state dir may be made under
EXAMPLE = ("add a storage.mounts entry mounted on the controllers, e.g. {path: /srv/slurmctld-state, server: nas1, "
           "export: /export/slurmstate, roles: [controller]}, and set slurm.state_save_location: /srv/slurmctld-state")


def _system(path: str) -> bool:
    """A system directory itself, or a path under one other than /var/lib/slurm/X and /var/spool/X."""
    if path in EXACT or path in SYSTEM:
        return True
    return any(under(path, s) for s in SYSTEM if s not in STATE_PARENTS)


def check_ha(cluster: Cluster, where: Where) -> list[Problem]:
    path, controllers = state_save_location(cluster), cluster.with_role("controller")
    at = where(("slurm", "state_save_location"))
    if _system(path):
        return [Problem(at, "slurmctld's StateSaveLocation cannot be a system directory (corral makes it owned "
                        "by slurm)", path, "use a directory of its own, e.g. /var/lib/slurm/slurmctld or a "
                                           "shared mount such as /srv/slurmctld-state")]
    mount = state_mount(cluster)
    if mount is not None:
        mounted = mount_nodes(cluster, mount)
        missing = [c.name for c in controllers if c not in mounted]
        if missing:
            i = cluster.spec.storage.mounts.index(mount)
            return [Problem(at, f"on the shared mount {mount.path}, which controller {', '.join(missing)} does "
                            "not mount (slurmctld there would write to the local disk underneath)", path,
                            f"add controller to storage.mounts[{i}].roles (or its nodes: hostlist)")]
        return []
    if len(controllers) == 2:
        primary, backup = controllers
        return [Problem(at, f"with two controllers (primary {primary.name}, backup {backup.name}) the "
                        "StateSaveLocation must be on shared storage mounted on both", path, EXAMPLE)]
    return []


def ha_warnings(cluster: Cluster) -> list[str]:
    """Two controllers whose state the cluster's own nfs node serves while being one of them."""
    controllers, mount, server = cluster.with_role("controller"), state_mount(cluster), nfs_server(cluster)
    if len(controllers) != 2 or mount is None or not mount.is_nfs() or mount.server is not None or server is None:
        return []
    if server not in controllers:
        return []
    return [f"slurm.state_save_location {state_save_location(cluster)}: served by {server.name} (the nfs node), "
            f"which is also a controller: losing {server.name} loses a controller and the state both; "
            "serve it from a NAS (storage.mounts[].server) or a node that is not a controller"]
