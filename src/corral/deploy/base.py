"""base: /etc/hosts entries from the spec; time sync (chrony, restarted by systemd when it dies), or why
not inside a container (where the restart drop-in is written all the same: a drop-in of a unit that is
not there is inert)."""

from __future__ import annotations

from pyinfra import host
from pyinfra.api import deploy, operation


from corral.deploy import operations
from corral.deploy.nodestate import Want, register, snapshot
from corral.render import apt
from corral.render.hosts import merge_hosts, render_hosts_block
from corral.render.restart import dropin_path

WANT = register(Want(paths=(dropin_path("chrony"),), blocks=("/etc/hosts",), packages=("chrony",),
                     services=("chrony",)))


@operation()
def time_sync(want: Want):
    """chrony installed and running; inside a container the host keeps time (no CAP_SYS_TIME)."""
    snap = snapshot(want)
    if snap.container != "none":
        host.noop(f"time sync: inside a {snap.container} container the host's clock is used "
                  "(chrony needs CAP_SYS_TIME); nothing to do")
        return
    if "chrony" not in snap.packages:
        yield apt.install_script(["chrony"])
    if snap.services.get("chrony") != ("active", "enabled"):
        yield "systemctl enable --now chrony"
    else:
        host.noop("time sync: chrony running")


@deploy("base")
def base() -> None:
    node, cluster = host.data.corral_node, host.data.corral_cluster
    operations.managed_block(name="/etc/hosts entries from the spec", path="/etc/hosts",
                      block=render_hosts_block(cluster, node), merge=merge_hosts, want=WANT)
    operations.restart_policy(name="chrony restarted by systemd when it dies", unit="chrony", want=WANT)
    time_sync(name="time sync", want=WANT)
