"""The virtual cluster's bridge: private subnet, host at .1, no NAT, no forwarding, no route out.

Every change is recorded in the cluster state so `down` undoes exactly what `up` did.
"""

from __future__ import annotations

import ipaddress
import time
from pathlib import Path

from corral.errors import HostToolError
from corral.virtual.host import run


def host_address(subnet: ipaddress.IPv4Network) -> str:
    return str(subnet.network_address + 1)


ALIAS = "corral-virtual"  # marks a bridge corral made, so the last cluster on it removes it


def bridge_exists(name: str) -> bool:
    return Path(f"/sys/class/net/{name}").exists()


def _ours(name: str) -> bool:
    try:
        return Path(f"/sys/class/net/{name}/ifalias").read_text().strip() == ALIAS
    except OSError:
        return False


def _ports(name: str) -> list[str]:
    try:
        return sorted(p.name for p in Path(f"/sys/class/net/{name}/brif").iterdir())
    except OSError:
        return []


def _sysctl_path(key: str) -> Path:
    return Path("/proc/sys") / key.replace(".", "/")


def read_sysctl(key: str) -> str:
    return _sysctl_path(key).read_text().strip()


def write_sysctl(key: str, value: str) -> None:
    _sysctl_path(key).write_text(value)


def bridge_up(name: str, subnet: ipaddress.IPv4Network, state: dict) -> None:
    """Create the bridge unless it is there. state['bridge_created'] records that corral made it (this
    cluster or another one sharing the bridge): `down` of the last cluster on it removes it."""
    addr = f"{host_address(subnet)}/{subnet.prefixlen}"
    if bridge_exists(name):
        have = run(["ip", "-o", "-4", "addr", "show", "dev", name], what="ip addr").stdout
        if addr not in have:
            raise HostToolError(f"bridge {name} exists without address {addr}",
                                value=have.strip() or "(no address)",
                                fix="pick another virtual.bridge name, or remove that bridge")
        if _ours(name):
            state["bridge_created"] = name
        return
    clash = run(["ip", "-o", "-4", "route", "show", "to", "match", str(subnet.network_address + 1)],
                what="ip route").stdout
    for line in clash.splitlines():
        if not line.startswith("default") and "dev" in line:
            raise HostToolError(f"subnet {subnet} overlaps a network already on this host",
                                value=line.strip(), fix="set virtual.subnet to an unused private /24")
    run(["ip", "link", "add", name, "type", "bridge"], what=f"creating bridge {name}")
    state["bridge_created"] = name
    run(["ip", "link", "set", "dev", name, "alias", ALIAS], what=f"marking bridge {name}")
    run(["ip", "addr", "add", addr, "dev", name], what=f"addressing bridge {name}")
    run(["ip", "link", "set", name, "up"], what=f"bringing up bridge {name}")
    # readiness polls would otherwise wait on 1 s ARP retries
    write_sysctl(f"net.ipv4.neigh.{name}.retrans_time_ms", "100")


def bridge_down(state: dict) -> None:
    """Remove the bridge corral made, unless another cluster's nodes are still on it."""
    name = state.pop("bridge_created", None)
    deadline = time.monotonic() + 3  # a stopped node's veth leaves the bridge a moment after it
    while name and _ports(name) and time.monotonic() < deadline:
        time.sleep(0.1)
    if name and bridge_exists(name) and not _ports(name):
        run(["ip", "link", "del", name], what=f"removing bridge {name}")


def raise_sysctl(key: str, minimum: int, state: dict) -> None:
    """Raise a host sysctl to at least `minimum`, remembering the original for `down`."""
    current = int(read_sysctl(key))
    if current >= minimum:
        return
    state.setdefault("sysctl_restore", {}).setdefault(key, str(current))
    write_sysctl(key, str(minimum))


def restore_sysctls(state: dict) -> None:
    for key, value in state.pop("sysctl_restore", {}).items():
        write_sysctl(key, value)
