"""What each deploy waits for on *other* nodes during `apply` (engine/execute.apply).

A node runs its deploys in `components()` order, one after the other. A deploy whose work needs a
service another node's deploy starts (slurmd needs slurmctld, `sacctmgr` needs slurmdbd, a client
mount needs its server) waits until that deploy is done on every node that had something to do in
it; everything else goes on at once, so a node with less to install is not held back by the slowest
one, and the slowest one's own path (the controller's, on a first deploy) is the run's time.

Every deploy of `components()` has an entry (`mark` raises without one): LOCAL, or the earlier
deploys it waits for. A deploy not marked (tests, ad-hoc lists) waits for every earlier deploy on
every node, as a barrier, which is always safe.
"""

from __future__ import annotations

from collections.abc import Callable

LOCAL: tuple[str, ...] = ()

WAITS: dict[str, tuple[str, ...]] = {
    "base": LOCAL,
    "proxy": LOCAL,
    "package source": LOCAL,
    "package upgrades": LOCAL,
    "slurm version": LOCAL,
    "sssd": LOCAL,               # the directory is outside the cluster (identity.ldap)
    "storage server": LOCAL,
    "storage mounts": ("storage server",),  # a client mounts what the server exports
    "users": LOCAL,              # homes are made on the node that holds them (spec/shared.home_maker)
    "slurm user": LOCAL,
    "packages": LOCAL,
    "munge": LOCAL,              # the key comes from the control host
    "health": LOCAL,
    "jobhooks": LOCAL,
    "nvidia driver": LOCAL,
    "mig": LOCAL,
    "containers": LOCAL,
    "accounting": LOCAL,         # MariaDB and slurmdbd on the same node
    "power": LOCAL,
    "slurm controller": ("accounting",),            # slurmctld registers with slurmdbd
    "slurm compute": ("slurm controller",),         # configless slurmd fetches its config from slurmctld
    "pam_slurm_adopt": ("slurm controller",),       # PrologFlags=Contain comes with the controller's slurm.conf
    "slurm login": ("slurm controller",),
    "accounting sync": ("accounting", "slurm controller"),  # sacctmgr through slurmdbd, the cluster registered
    "dcgm": LOCAL,
    "nvidia tools": LOCAL,
    "acceptance tools": LOCAL,
    "monitoring": LOCAL,         # Prometheus scrapes targets whenever they answer
    "slurm exporter": ("slurm controller",),        # reads sinfo, squeue, sdiag
    "dcgm exporter": LOCAL,
    "grafana": LOCAL,            # its data source is read when a dashboard is opened
    "kubernetes node": LOCAL,    # kubeadm init on the first control-plane node; joins follow the run
    "kubernetes cluster": ("kubernetes node",),
}


def mark(deploys: list[Callable]) -> list[Callable]:
    """Give each deploy its `waits_for` (the names it waits for; the engine reads it). Raises KeyError
    for a deploy without an entry here: its author decides, not a default."""
    for d in deploys:
        d.waits_for = WAITS[getattr(d, "deploy_name", d.__name__)]  # type: ignore[attr-defined]
    return deploys
