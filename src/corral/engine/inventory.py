"""Spec -> pyinfra Inventory. Host data comes from the spec only, never from other hosts' facts.

SSH is pinned and self-contained: strict host key checking against the state dir's known_hosts,
and a generated ssh_config (state dir) instead of ~/.ssh/config, so a user's personal config can
neither redirect a node nor relax checking. A jump host, if set, is a ProxyJump in that file.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable
from pathlib import Path

from pyinfra.api import Inventory

from corral.engine import hostkeys
from corral.errors import CorralError, UsageError
from corral.spec.cluster import Cluster, Node

SSH_CONFIG = "ssh_config"


def select_nodes(cluster: Cluster, nodes: Iterable[Node | str] | None = None) -> list[Node]:
    """Nodes of the cluster, in spec order, restricted to `nodes` (Node objects or names)."""
    if nodes is None:
        return list(cluster.nodes)
    wanted = {n.name if isinstance(n, Node) else str(n) for n in nodes}
    known = {n.name for n in cluster.nodes}
    unknown = sorted(wanted - known)
    if unknown:
        raise UsageError(f"unknown node {unknown[0]!r}", value=",".join(unknown),
                         fix=f"choose from the spec's nodes: {', '.join(sorted(known))}")
    return [n for n in cluster.nodes if n.name in wanted]


def _write_private(path: Path, text: str) -> None:
    """Write a 0600 file atomically (aside, then renamed): a concurrent reader, e.g. an ssh client
    reading its config, never sees half a file. Unchanged content is not rewritten."""
    try:
        if path.read_text(encoding="utf-8") == text:
            return
    except OSError:
        pass
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)


def ssh_config_text(cluster: Cluster, nodes: list[Node]) -> str:
    ssh = cluster.spec.ssh
    key = cluster.ssh_key()
    lines = ["# written by corral for every run; edit cluster.yaml (ssh:) instead", ""]
    if ssh.jump_host:
        addresses = " ".join(n.address for n in nodes)
        lines += [f"Host {addresses}", f"    ProxyJump {ssh.jump_host}", ""]
    lines += ["Host *", "    StrictHostKeyChecking yes",
              f"    UserKnownHostsFile {hostkeys.known_hosts_path(cluster.state_dir)}",
              f"    User {ssh.user}"]
    if key:
        lines.append(f"    IdentityFile {key}")
    return "\n".join(lines) + "\n"


def clear_pyinfra_ssh_caches() -> None:
    """pyinfra memoizes known_hosts and ssh_config per file name for the whole process: forget them,
    so a key trusted (or a spec changed) since the last run in this process is seen."""
    from corral.engine.pyinfra_seam import clear_ssh_caches

    clear_ssh_caches()


def local_inventory(cluster: Cluster, node: str) -> Inventory:
    """One host, this machine (pyinfra's @local connector), named as the spec's `node`: what
    `corral node converge` runs the deploys against on the node itself (corral/fanout/)."""
    n = select_nodes(cluster, [node])[0]
    data = {"corral_cluster": cluster, "corral_node": n, "ssh_hostname": n.address,
            "corral_index": [m.name for m in cluster.nodes].index(n.name)}
    inventory = Inventory(([("@local", data)], {}), **{role: (["@local"], {}) for role in n.roles})
    for host in inventory:
        host.name = n.name  # results, events and journals are keyed by the spec's node name
    return inventory


def build_inventory(cluster: Cluster, nodes: Iterable[Node | str] | None = None) -> Inventory:
    """One pyinfra host per node (host name = node name), groups by role.

    Host data: ssh_* connection settings, `corral_node` (Node), `corral_cluster` (Cluster) and
    `corral_index` (the node's position in the spec) for deploys to read through `host.data`.
    """
    selected = select_nodes(cluster, nodes)
    ssh = cluster.spec.ssh
    key = cluster.ssh_key()
    if key is not None and not key.is_file():
        raise UsageError("the SSH private key named in the spec does not exist", value=str(key),
                         fix="set ssh.key in cluster.yaml to a readable private key file")
    state_dir = cluster.state_dir
    ssh_config = state_dir / SSH_CONFIG
    _write_private(ssh_config, ssh_config_text(cluster, selected))
    clear_pyinfra_ssh_caches()

    common = {
        "ssh_port": ssh.port,
        "ssh_user": ssh.user,
        "ssh_known_hosts_file": str(hostkeys.known_hosts_path(state_dir)),
        "ssh_strict_host_key_checking": "yes",
        "ssh_config_file": str(ssh_config),
        "ssh_forward_agent": False,
        "corral_cluster": cluster,
    }
    if key is not None:
        common["ssh_key"] = str(key)
    index = {n.name: i for i, n in enumerate(cluster.nodes)}
    hosts = [(n.name, {"ssh_hostname": n.address, "corral_node": n, "corral_index": index[n.name]})
             for n in selected]
    groups: dict[str, tuple[list[str], dict]] = {}
    for n in selected:
        for role in n.roles:
            groups.setdefault(role, ([], {}))[0].append(n.name)
    try:
        return Inventory((hosts, common), **groups)
    except Exception as exc:  # pyinfra raises plain exceptions for bad names
        raise CorralError(f"cannot build the inventory: {exc}") from exc
