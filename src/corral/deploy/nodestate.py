"""One command per node and deploy reads everything the deploy's operations compare against:
files (mode, owner, sha256), services (active, enabled), packages (version), apt list age.

pyinfra 3 does not cache facts, so a fact per operation would cost one SSH exec each; a converged
node then answers every operation from this one snapshot (kept on the pyinfra host object, which
lives for one run).
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field

from pyinfra import host
from pyinfra.api import FactBase


@dataclass(frozen=True)
class Want:
    """What one deploy manages on one node."""

    paths: tuple[str, ...] = ()
    services: tuple[str, ...] = ()
    packages: tuple[str, ...] = ()
    blocks: tuple[str, ...] = ()   # files holding a "# BEGIN corral ... # END corral" block


@dataclass
class Snapshot:
    files: dict[str, dict | None] = field(default_factory=dict)     # path -> {kind, mode, user, group, sha256}
    services: dict[str, tuple[str, str]] = field(default_factory=dict)  # name -> (is-active, is-enabled)
    packages: dict[str, str] = field(default_factory=dict)          # name -> installed version
    blocks: dict[str, str] = field(default_factory=dict)            # path -> sha256 of corral's block
    apt_lists_age_s: int | None = None
    container: str = "none"          # systemd-detect-virt -c
    want: Want = Want()              # what this snapshot read


class NodeState(FactBase):
    """Snapshot of the paths, services and packages given (see Want)."""

    def command(self, paths=(), services=(), packages=(), blocks=()):
        q = shlex.quote
        lines = ["now=$(date +%s)", "echo \"V\t$(systemd-detect-virt -c 2>/dev/null)\""]
        for p in blocks:
            lines.append(f"echo \"B\t\"{q(p)}\"\t$(sed -n '/^# BEGIN corral/,/^# END corral/p' {q(p)} "
                         "2>/dev/null | sha256sum | cut -d' ' -f1)\"")
        for p in paths:
            lines.append(
                f"if [ -d {q(p)} ]; then echo \"D\t\"{q(p)}\"\t$(stat -c '%a\t%U\t%G' {q(p)})\"; "
                f"elif [ -e {q(p)} ]; then echo \"F\t\"{q(p)}\"\t$(stat -c '%a\t%U\t%G' {q(p)})\t"
                f"$(sha256sum < {q(p)} | cut -d' ' -f1)\"; else echo \"M\t\"{q(p)}; fi")
        for s in services:
            lines.append(f"echo \"S\t{s}\t$(systemctl is-active {q(s)} 2>/dev/null)\t"
                         f"$(systemctl is-enabled {q(s)} 2>/dev/null)\"")
        if packages:
            names = " ".join(q(p) for p in packages)
            lines.append("dpkg-query -W -f='P\\t${Package}\\t${Version}\\t${db:Status-Status}\\n' "
                         f"{names} 2>/dev/null || true")
        lines.append("echo \"A\t$(( now - $(stat -c %Y /var/lib/apt/periodic/update-success-stamp "
                     "2>/dev/null || echo 0) ))\"")
        return "; ".join(lines)

    def process(self, output) -> Snapshot:
        snap = Snapshot()
        for line in output:
            kind, _, rest = line.partition("\t")
            parts = rest.split("\t")
            if kind == "F" and len(parts) >= 5:
                snap.files[parts[0]] = {"kind": "file", "mode": parts[1], "user": parts[2],
                                        "group": parts[3], "sha256": parts[4]}
            elif kind == "D" and len(parts) >= 4:
                snap.files[parts[0]] = {"kind": "dir", "mode": parts[1], "user": parts[2], "group": parts[3]}
            elif kind == "M":
                snap.files[parts[0]] = None
            elif kind == "S" and len(parts) >= 3:
                snap.services[parts[0]] = (parts[1], parts[2])
            elif kind == "P" and len(parts) >= 3 and parts[2] == "installed":
                snap.packages[parts[0]] = parts[1]
            elif kind == "V":
                snap.container = parts[0].strip() or "none"
            elif kind == "B" and len(parts) >= 2:
                snap.blocks[parts[0]] = parts[1]
            elif kind == "A" and parts and parts[0].lstrip("-").isdigit():
                snap.apt_lists_age_s = int(parts[0])
        return snap


_REGISTERED: list[Want] = []


def register(want: Want) -> Want:
    """Declare what a deploy manages; every node's snapshot reads the union of all declared Wants
    in one command, before the run changes anything (each op manages objects no other op does)."""
    _REGISTERED.append(want)
    return want


def _union(extra: Want) -> Want:
    wants = [*_REGISTERED, extra]
    return Want(*(tuple(sorted({item for w in wants for item in getattr(w, f)}))
                  for f in ("paths", "services", "packages", "blocks")))


def snapshot(want: Want) -> Snapshot:
    """The node's snapshot for `want`, read once per run (cached on the run's pyinfra State;
    `host` is a context proxy, so nothing may be stored on it)."""
    cache = vars(host.state).setdefault("_corral_snapshots", {})
    snap = cache.get(host.name)
    if snap is None or not _covers(snap, want):
        full = _union(want)
        snap = cache[host.name] = host.get_fact(NodeState, paths=full.paths, services=full.services,
                                                packages=full.packages, blocks=full.blocks)
        snap.want = full
    return snap


def _covers(snap: Snapshot, want: Want) -> bool:
    have = snap.want
    return all(set(getattr(want, f)) <= set(getattr(have, f)) for f in ("paths", "services", "packages", "blocks"))
