"""Engine smoke deploy (test scaffolding): memcached installed, configured per node, running. Proves the engine end to
end on virtual nodes (package + templated file + service); a second apply reports 0 changes.

Per node: listens on the node's own address, memory 32 + 8 * (index of the node in the spec) MB.
Packages come from the node's configured apt repository (corral's local repository on a virtual
cluster); the apt cache is refreshed only when a package is missing and the cache is older than
CACHE_TIME. memcached is restarted only when its configuration changed.
"""

from __future__ import annotations

from pathlib import Path

from pyinfra import host
from pyinfra.api import deploy, operation
from pyinfra.facts.deb import DebPackages
from pyinfra.operations import apt, files, systemd

TEMPLATE = Path(__file__).parent / "memcached.conf.j2"
CACHE_TIME = 3600
PACKAGES = ["memcached"]


@operation()
def packages_installed(packages: list[str], cache_time: int = CACHE_TIME):
    """Install missing Debian packages; `apt-get update` first only if something is missing and
    the cache is older than cache_time (apt.packages(update=True) would refresh on every run
    once the cache is old, so a converged node would still report a change)."""
    installed = host.get_fact(DebPackages) or {}
    missing = [p for p in packages if p not in installed]
    if not missing:
        host.noop(f"package(s) {', '.join(packages)} installed")
        return
    yield from apt.update._inner(cache_time=cache_time)
    yield from apt.packages._inner(packages=missing, no_recommends=True)


def memory_mb(index: int) -> int:
    return 32 + 8 * index


@deploy("smoke")
def smoke() -> None:
    node = host.data.corral_node
    packages_installed(name="memcached installed", packages=PACKAGES)
    config = files.template(
        name="memcached configured", src=str(TEMPLATE), dest="/etc/memcached.conf",
        user="root", group="root", mode="644",
        node_name=node.name, listen=node.address, memory_mb=memory_mb(host.data.corral_index))
    systemd.service(name="memcached running", service="memcached", running=True, enabled=True)
    systemd.service(name="memcached restarted (configuration changed)", service="memcached",
                    restarted=True, _if=config.did_change)
