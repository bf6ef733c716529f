"""`power:` expanded and checked: which BMC (a base URL) answers for which compute node, and what Slurm
must never power down (SuspendExcNodes). Pure; spec/rules.py calls check_power, render/power.py and
virtual/bmc.py use bmc_urls and excluded."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from corral.errors import Problem
from corral.spec.hosts import RangeError, count_addresses, expand_addresses, expand_names
from corral.spec.models_power import MIN_SUSPEND_S
from corral.spec.rules_ldap import _file_problem as file_problem

if TYPE_CHECKING:
    from corral.spec.cluster import Cluster

Where = Callable[..., str]
NEVER_OFF = ("controller", "login", "accounting", "monitoring", "nfs")  # roles Slurm must never power off


def _host(address: str) -> str:
    return f"[{address}]" if ":" in address and not address.startswith("[") else address


def bmc_urls(cluster: Cluster) -> dict[str, str]:
    """node name -> its BMC's base URL (scheme://host[:port]), for nodes the spec maps; {} when off.
    Assumes a checked spec (malformed entries are skipped here, reported by check_power)."""
    power = cluster.spec.power
    if not power.enabled or power.bmc is None:
        return {}
    bmc, out = power.bmc, {}
    for entry in bmc.nodes:
        try:
            names = expand_names(entry.names)
            if entry.address is not None:
                addresses = [entry.address] * len(names)
            else:
                port = f":{bmc.port}" if bmc.port else ""
                addresses = [_host(a) + port for a in expand_addresses(entry.addresses or "")]
        except RangeError:
            continue
        for name, address in zip(names, addresses):
            out.setdefault(name, f"{bmc.scheme}://{address}")
    return out


def excluded(cluster: Cluster) -> list[str]:
    """Compute nodes Slurm never powers down: those with a role that must stay up, and power.exclude."""
    power = cluster.spec.power
    skip = set(expand_names(power.exclude)) if power.exclude else set()
    return [n.name for n in cluster.with_role("compute") if n.name in skip or set(n.roles) & set(NEVER_OFF)]


def virtual_bmc_listen(cluster: Cluster) -> tuple[str, int] | None:
    """Where a virtual cluster's emulated BMC listens: the bridge's host address and the port of the
    `address` entries (None: power off, or not a virtual cluster)."""
    v, power = cluster.spec.virtual, cluster.spec.power
    if v is None or not power.enabled or power.bmc is None:
        return None
    gateway = str(v.subnet.network_address + 1)
    for entry in power.bmc.nodes:
        host, _, port = (entry.address or "").rpartition(":")
        if host == gateway and port.isdigit() and 1024 <= int(port) <= 65535:
            return gateway, int(port)
    return None


def _check_virtual(cluster: Cluster, where: Where) -> list[Problem]:
    """A virtual cluster's BMC is the emulated one on the host side of the bridge: every entry names it."""
    gateway = str(cluster.spec.virtual.subnet.network_address + 1)
    listen = virtual_bmc_listen(cluster)
    want = f"{gateway}:{listen[1] if listen else 18623}"
    for i, entry in enumerate(cluster.spec.power.bmc.nodes):
        if entry.address != want:
            return [Problem(where(("power", "bmc", "nodes", i)), "a virtual cluster's BMC is the emulated one on "
                            f"the bridge's host address ({gateway}) with one port from 1024", entry.address or
                            entry.addresses, f"write address: {want}")]
    return []


def check_power(cluster: Cluster, where: Where) -> list[Problem]:
    """The BMC mapping and exclude are checked whenever given (a bad one is an error even while power is
    off); what power saving needs (BMCs for every node it may power off, credentials) only when enabled."""
    power = cluster.spec.power
    at, problems = ("power",), []
    compute = {n.name for n in cluster.with_role("compute")}
    if power.exclude:
        try:
            unknown = [x for x in expand_names(power.exclude) if x not in compute]
        except RangeError as exc:
            unknown, problems = [], problems + [Problem(where(at + ("exclude",)), str(exc), power.exclude,
                                                        "write names like 'gpu[01-02]'")]
        if unknown:
            problems.append(Problem(where(at + ("exclude",)), f"{unknown[0]} is not a compute node",
                                    power.exclude, "name compute nodes of the spec"))
    if power.bmc is not None:
        problems += _check_entries(cluster, where, compute)
    if not power.enabled:
        return problems
    if power.suspend_after < MIN_SUSPEND_S:
        problems.append(Problem(where(at + ("suspend_after",)), f"shorter than {MIN_SUSPEND_S}s",
                                power.suspend_after, f"give at least {MIN_SUSPEND_S}s (e.g. 30m)"))
    if power.bmc is None:
        return problems + [Problem(where(at + ("enabled",)), "power saving without BMCs: nothing could power a "
                                   "node on again", True, "add power.bmc (credentials_file and nodes)")]
    if cluster.spec.virtual is not None:
        problems += _check_virtual(cluster, where)
    if power.bmc.scheme == "http" and not cluster.spec.allow_http and cluster.spec.virtual is None:
        problems.append(Problem(where(at + ("bmc", "scheme")), "http sends the BMC credentials in clear",
                                "http", "use https (or set allow_http: true for a trusted management network)"))
    problems += _check_credentials(cluster, where)
    mapped = bmc_urls(cluster)
    missing = [n for n in sorted(compute) if n not in mapped and n not in excluded(cluster)]
    if missing:
        problems.append(Problem(where(at + ("bmc", "nodes")), f"no BMC for compute node {missing[0]}"
                                + (f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""), missing[0],
                                "add it to power.bmc.nodes, or to power.exclude (never powered off)"))
    return problems


def credentials_path(cluster: Cluster) -> Path:
    """power.bmc.credentials_file on the control host (relative to the spec file's directory)."""
    return (cluster.base_dir / Path(cluster.spec.power.bmc.credentials_file).expanduser()).resolve()


def _check_credentials(cluster: Cluster, where: Where) -> list[Problem]:
    """The credentials file is readable on the control host; a virtual cluster's may be missing until
    `corral virtual up` generates it (virtual/bmc.py)."""
    path = credentials_path(cluster)
    if cluster.spec.virtual is not None and not path.exists():
        return []
    why = file_problem(path)
    if why is None:
        return []
    return [Problem(where(("power", "bmc", "credentials_file")), f"BMC credentials file {path}: {why}",
                    cluster.spec.power.bmc.credentials_file,
                    "write `user:password` on the first line of that file (chmod 600), or correct the path")]


def _check_entries(cluster: Cluster, where: Where, compute: set[str]) -> list[Problem]:
    problems: list[Problem] = []
    seen: dict[str, int] = {}
    for i, entry in enumerate(cluster.spec.power.bmc.nodes):
        at = ("power", "bmc", "nodes", i)
        if (entry.address is None) == (entry.addresses is None):
            problems.append(Problem(where(at), "give either address (one BMC for all these names) or addresses "
                                    "(one per name)", entry.names, "keep exactly one of address and addresses"))
            continue
        try:
            names = expand_names(entry.names)
        except RangeError as exc:
            problems.append(Problem(where(at + ("names",)), str(exc), entry.names, "write names like 'gpu[01-16]'"))
            continue
        for name in names:
            if name not in compute:
                problems.append(Problem(where(at + ("names",)), f"{name} is not a compute node", entry.names,
                                        "name compute nodes of the spec"))
                break
            if name in seen:
                problems.append(Problem(where(at + ("names",)), f"{name} has a BMC already (power.bmc.nodes[{seen[name]}])",
                                        entry.names, "give each node one BMC"))
                break
            seen[name] = i
        if entry.addresses is not None:
            try:
                count = count_addresses(entry.addresses)
                if count == len(names):
                    expand_addresses(entry.addresses)
            except RangeError as exc:
                problems.append(Problem(where(at + ("addresses",)), str(exc), entry.addresses,
                                        "give a list, a range '10.1.0.11-26' or '10.1.0.[11-26]'"))
                continue
            if count != len(names):
                problems.append(Problem(where(at + ("addresses",)), f"{len(names)} names but {count} addresses",
                                        entry.addresses, "give exactly one BMC address per name, in the same order"))
    return problems


def power_warnings(cluster: Cluster) -> list[str]:
    power = cluster.spec.power
    if power.enabled and power.bmc is not None and not power.bmc.verify_tls and power.bmc.scheme == "https":
        return ["power.bmc.verify_tls is false: the BMCs' certificates are not checked (a host on the management "
                "network could take the BMC credentials)"]
    return []
