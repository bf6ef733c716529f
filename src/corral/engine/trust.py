"""`corral trust`: read a node's ed25519 host key, say what pinning it would do, pin it.

Two steps so that a person can compare the fingerprint in between: `inspect` scans (trusts nothing)
and compares with the state dir's known_hosts; `pin` writes it there.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from corral.engine import hostkeys
from corral.engine.hostkeys import HostKey


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
