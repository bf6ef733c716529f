"""The components every scheduler's nodes start with: /etc/hosts and time sync, the proxy, the package
source (Debian's mirror, or the bundle's repository)."""

from __future__ import annotations

from corral.components import Component, daemons, gives


def time_sync(cluster, node) -> dict[str, str]:
    """chrony on real servers; a virtual node is a container, whose clock is the host's (no CAP_SYS_TIME)."""
    return gives(["chrony"], "time sync") if cluster.spec.virtual is None else {}


HEAD = (
    Component("base", packages=time_sync, daemons=daemons.base),
    Component("proxy"),
    Component("package source"),
)
