"""Connect to every node in parallel; a node that cannot be reached fails alone, with a clear why.

pyinfra's `connect_all` re-raises any non-ConnectError from one host (aborting all) and raises
"No hosts remaining!" when every host failed; this loop does neither. pyinfra wraps the cause in
a ConnectError whose `__context__` is the paramiko/socket exception: that chain is classified.
"""

from __future__ import annotations

import socket

import gevent
from paramiko import AuthenticationException, BadHostKeyException, SSHException
from paramiko.ssh_exception import NoValidConnectionsError

from corral.engine import hostkeys
from corral.errors import NodeError
from corral.spec.cluster import Cluster


def _chain(exc: BaseException | None) -> list[BaseException]:
    seen: list[BaseException] = []
    while exc is not None and exc not in seen:
        seen.append(exc)
        exc = exc.__cause__ or exc.__context__
    return seen


def classify(exc: BaseException) -> str:
    """hostkey-unknown | hostkey-changed | auth | refused | timeout | dns | connect."""
    chain = _chain(exc)
    text = " ".join(str(e) for e in chain)
    for e in chain:
        if isinstance(e, BadHostKeyException):
            return "hostkey-changed"
        if isinstance(e, AuthenticationException):
            return "auth"
        if isinstance(e, NoValidConnectionsError):
            errors = list(e.errors.values())
            if errors and all(isinstance(x, ConnectionRefusedError) for x in errors):
                return "refused"
            if any(isinstance(x, (TimeoutError, socket.timeout)) for x in errors):
                return "timeout"
        if isinstance(e, ConnectionRefusedError):
            return "refused"
        if isinstance(e, (TimeoutError, socket.timeout)):
            return "timeout"
        if isinstance(e, socket.gaierror):
            return "dns"
    if "StrictPolicy: No host key" in text:
        return "hostkey-unknown"
    if "does not match" in text and "Host key" in text:
        return "hostkey-changed"
    if "Authentication" in text:
        return "auth"
    if "timed out" in text or "protocol banner" in text:
        return "timeout"
    if "refused" in text or "Unable to connect to port" in text:
        return "refused"
    if isinstance(exc, SSHException) or "resolve hostname" in text:
        return "dns" if "resolve hostname" in text else "connect"
    return "connect"


def explain(cluster: Cluster, node_name: str, address: str, exc: BaseException) -> tuple[str, str]:
    """(kind, one-line message naming node, address and fix) for a connection failure."""
    kind = classify(exc)
    ssh = cluster.spec.ssh
    entry = hostkeys.host_entry(address, ssh.port)
    kh = hostkeys.known_hosts_path(cluster.state_dir)
    raw = str(exc).strip() or type(exc).__name__
    via_jump = bool(ssh.jump_host) and entry not in raw and address not in raw
    if kind == "hostkey-unknown":
        what = f"jump host {ssh.jump_host}" if via_jump else entry
        msg, fix = (f"host key of {what} is not pinned (not in {kh}); corral never accepts an unknown key",
                    f"run `corral trust {node_name}` after checking the fingerprint")
    elif kind == "hostkey-changed":
        what = f"jump host {ssh.jump_host}" if via_jump else entry
        msg, fix = (f"host key changed for {what} — possible MITM or reinstalled node",
                    f"verify, then `corral trust --replace {node_name}`")
    elif kind == "auth":
        msg = f"SSH authentication failed as {ssh.user}@{entry} with key {cluster.ssh_key() or '(agent)'}"
        fix = "check ssh.user and ssh.key in cluster.yaml and the node's authorized_keys"
        if ssh.user != "root" and cluster.spec.identity.pam_slurm_adopt:
            fix += (f"; on a compute node pam_slurm_adopt admits only root, the SSH user the node was last "
                    f"applied with and identity.adopt_exempt_users: list {ssh.user} there and apply once with "
                    "the previous ssh.user")
    elif kind == "refused":
        msg, fix = (f"connection refused by {entry}",
                    "check the node is up and sshd listens on that address and port")
    elif kind == "timeout":
        msg, fix = (f"connection to {entry} timed out ({raw})",
                    "check the node is powered on, its address in cluster.yaml, and the network/firewall")
    elif kind == "dns":
        msg, fix = f"cannot resolve {address}", "use an IP address or fix name resolution"
    else:
        msg, fix = f"cannot connect to {entry}: {raw}", "check the node and its SSH settings"
    return kind, str(NodeError(msg, node=node_name, fix=fix))


def connect(state, cluster: Cluster) -> dict[str, tuple[str, str]]:
    """Connect all inventory hosts in parallel; returns {node: (kind, message)} for failures."""
    failures: dict[str, tuple[str, str]] = {}

    def one(host) -> None:
        try:
            host.connect(show_errors=False, raise_exceptions=True)
        except Exception as exc:  # noqa: BLE001 - ConnectError, bad key file, anything: node fails
            failures[host.name] = explain(cluster, host.name, host.data.ssh_hostname, exc)

    hosts = list(state.inventory)
    gevent.joinall([state.pool.spawn(one, h) for h in hosts])
    for host in hosts:
        if host.connected:
            state.activate_host(host)
        else:
            failures.setdefault(host.name, ("connect", f"{host.name}: not connected"))
            state.failed_hosts.add(host)
    return failures
