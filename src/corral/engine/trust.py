"""`corral trust`: read a node's ed25519 host key, say what pinning it would do, pin it; forget it.

Two steps so that a person can compare the fingerprint in between: `inspect` scans (trusts nothing)
and compares with the state dir's known_hosts; `pin` writes it there. `forget` (`--forget`) drops a
node's pinned keys, the node named in the spec or only in corral's record of deployed nodes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from corral.engine import hostkeys, node_record
from corral.engine.hostkeys import HostKey
from corral.errors import UsageError
from corral.spec.cluster import Cluster


@dataclass(frozen=True)
class Scanned:
    node: str
    address: str
    port: int
    pubkey: str                        # "ssh-ed25519 BASE64", as the node presents it now
    pinned: tuple[HostKey, ...] = ()   # what known_hosts holds for address:port already

    @property
    def fingerprint(self) -> str:
        return hostkeys.fingerprint(self.pubkey)

    @property
    def state(self) -> str:
        """'new' (nothing pinned), 'same' (this key is pinned) or 'changed' (another key is pinned)."""
        if not self.pinned:
            return "new"
        keytype, key = self.pubkey.split()[:2]
        return "same" if all((k.keytype, k.key) == (keytype, key) for k in self.pinned) else "changed"

    @property
    def line(self) -> str:
        """What the CLI shows before asking: `gpu01 (10.0.0.11): SHA256:...`."""
        return f"{self.node} ({self.address}): {self.fingerprint}"


def inspect(known_hosts: Path, node: str, address: str, port: int = 22, *,
            scan: Callable[[str, int], str] | None = None) -> Scanned:
    """Read the node's host key (`scan`, default hostkeys.scan) and what is pinned for it; writes nothing."""
    pubkey = (scan or hostkeys.scan)(address, int(port))
    return Scanned(node, address, int(port), pubkey, tuple(hostkeys.lookup(known_hosts, address, port)))


def pin(known_hosts: Path, found: Scanned, *, replace: bool = False) -> HostKey:
    """Pin the scanned key (the state dir is made 0700). A different key already pinned is a
    CorralError unless replace; the same key again changes nothing."""
    Path(known_hosts).parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    return hostkeys.add(known_hosts, found.address, found.port, found.pubkey, replace=replace)


@dataclass(frozen=True)
class Forgotten:
    node: str
    keys: tuple[HostKey, ...]   # the pinned keys removed
    unrecorded: bool            # dropped from the record of deployed nodes (a removal left unfinished)


def forget(cluster: Cluster, names: list[str]) -> list[Forgotten]:
    """Drop every key pinned for each node: under its name and its address (spec and record), at the
    spec's and the recorded SSH port, as known_hosts holds them. A node out of the spec whose removal
    could not stop its services (gone for good) also leaves the record. A node neither in the spec nor
    in the record is a UsageError, before anything is dropped."""
    record = node_record.read(cluster.state_dir)
    spec = {n.name: n for n in cluster.nodes}
    unknown = [name for name in names if name not in spec and name not in record]
    if unknown:
        raise UsageError(f"unknown node {unknown[0]!r}: not in the spec nor in corral's record of deployed nodes",
                         value=",".join(unknown),
                         fix="give a node of the spec, or one an apply deployed: " + ", ".join(sorted(record)[:20]))
    done = []
    for name in names:
        addresses = {name} | {d.address for d in (spec.get(name), record.get(name)) if d is not None}
        ports = {int(cluster.spec.ssh.port)} | ({record[name].ssh_port} if name in record else set())
        hosts = {hostkeys.host_entry(a, p) for a in addresses for p in ports}
        keys = hostkeys.remove_hosts(hostkeys.known_hosts_path(cluster.state_dir), hosts)
        done.append(Forgotten(name, tuple(keys), name not in spec and node_record.forget(cluster.state_dir, name)))
    return done
