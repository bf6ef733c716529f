"""One command per node and deploy reads everything the deploy's operations compare against:
files (mode, owner, sha256), services (active, enabled), packages (version: dpkg), apt list age.

pyinfra 3 does not cache facts, so a fact per operation would cost one SSH exec each; a converged
node then answers every operation from this one snapshot (kept in the run's context,
engine/run_context.py, which lives for one run).
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field

from pyinfra import host
from pyinfra.api import FactBase

from corral.engine import run_context
from corral.engine.run_context import WANT_FIELDS
from corral.render.quickack import parse_local_routes


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
    local_routes: dict[str, bool] = field(default_factory=dict)  # own address -> quickack (render/quickack.py)
    want: Want = Want()              # what this snapshot read


class NodeState(FactBase):
    """Snapshot of the paths, services and packages given (see Want)."""

    def command(self, paths=(), services=(), packages=(), blocks=()):
        """A few processes however many objects: one stat, one sha256sum, one systemctl show."""
        q = shlex.quote
        lines = ["now=$(date +%s)", "echo \"V|$(systemd-detect-virt -c 2>/dev/null)\""]
        for p in blocks:
            lines.append(f"echo \"B|$(sed -n '/^# BEGIN corral/,/^# END corral/p' {q(p)} "
                         f"2>/dev/null | sha256sum | cut -d' ' -f1)|\"{q(p)}")
        if paths:
            names = " ".join(q(p) for p in paths)
            lines.append(f"stat -c 'T|%F|%a|%U|%G|%n' -- {names} 2>/dev/null")
            lines.append(f"sha256sum -- {names} 2>/dev/null | sed 's/^\\([0-9a-f]*\\)  /H|\\1|/'")
        if services:
            units = " ".join(q(s if s.endswith(".timer") else f"{s}.service") for s in services)  # a timer by its name
            lines.append(f"systemctl show -p Id -p ActiveState -p UnitFileState {units} 2>/dev/null "
                         "| sed 's/^/S|/'")
        if packages:
            names = " ".join(q(p) for p in packages)
            lines.append(f"dpkg-query -W -f='P|${{Package}}|${{Version}}|${{db:Status-Status}}\\n' -- {names} "
                         "2>/dev/null")
        lines.append("for f in -4 -6; do ip -o \"$f\" route show table local type local; done 2>/dev/null "
                     "| sed 's/^/R|/'")
        lines.append("echo \"A|$(( now - $(stat -c %Y /var/lib/apt/periodic/update-success-stamp "
                     "2>/dev/null || echo 0) ))\"")
        return "; ".join(lines) + "; true"

    def process(self, output) -> Snapshot:
        return parse_snapshot(list(output))


def parse_snapshot(lines: list[str]) -> Snapshot:
    snap, hashes, unit = Snapshot(), {}, {}
    units: list[dict] = []
    for line in lines:
        kind, _, rest = line.partition("|")
        if kind == "T":
            ftype, mode, user, group, path = (rest.split("|", 4) + [""] * 5)[:5]
            snap.files[path] = {"kind": "dir" if ftype == "directory" else "file", "mode": mode,
                                "user": user, "group": group}
        elif kind == "H":
            sha, _, path = rest.partition("|")
            hashes[path] = sha
        elif kind == "S":
            key, _, value = rest.partition("=")
            if not key:
                continue
            if key == "Id" and unit:
                units.append(unit)
                unit = {}
            unit[key] = value
        elif kind == "P":
            parts = rest.split("|")
            if len(parts) >= 3 and parts[2] == "installed":
                snap.packages[parts[0]] = parts[1]
        elif kind == "V":
            snap.container = rest.strip() or "none"
        elif kind == "B":
            sha, _, path = rest.partition("|")
            snap.blocks[path] = sha
        elif kind == "R":
            snap.local_routes.update(parse_local_routes([rest]))
        elif kind == "A" and rest.lstrip("-").isdigit():
            snap.apt_lists_age_s = int(rest)
    if unit:
        units.append(unit)
    for u in units:
        if u.get("Id"):
            snap.services[u["Id"].removesuffix(".service")] = (u.get("ActiveState", "unknown"),
                                                              u.get("UnitFileState") or "not-found")
    for path, info in snap.files.items():
        if info and info["kind"] == "file":
            info["sha256"] = hashes.get(path)
    return snap


_DECLARED: list[Want] = []  # the Wants deploy modules declare when imported: the same for every run


def register(want: Want) -> Want:
    """Declare, at module level, what a deploy manages in every run; every node's snapshot reads the
    union of all declared Wants in one command, before the run changes anything (each op manages
    objects no other op does). What is known only from the spec: `register_for_run`."""
    _DECLARED.append(want)
    return want


def register_for_run(want: Want) -> Want:
    """Add to this run's snapshot what a deploy manages that only the spec names (users' key files,
    mount units, packages of a configured version): called while the deploy is prepared, i.e. before
    any snapshot is read; kept in the run's context (engine/run_context.py), gone after the run."""
    wants = run_context.current().wants
    for f in WANT_FIELDS:
        wants[f].update(getattr(want, f))
    return want


def _union(extra: Want) -> Want:
    run = run_context.current().wants if run_context.in_run() else {}
    return Want(*(tuple(sorted({item for w in [*_DECLARED, extra] for item in getattr(w, f)} | run.get(f, set())))
                  for f in WANT_FIELDS))


def snapshot(want: Want) -> Snapshot:
    """The node's snapshot for `want`, read once per run (kept in the run's context;
    `host` is a context proxy, so nothing may be stored on it)."""
    cache = run_context.current().snapshots
    snap = cache.get(host.name)
    if snap is None or not _covers(snap, want):
        full = _union(want)
        snap = cache[host.name] = host.get_fact(NodeState, paths=full.paths, services=full.services,
                                                packages=full.packages, blocks=full.blocks)
        snap.want = full
    return snap


def _covers(snap: Snapshot, want: Want) -> bool:
    have = snap.want
    return all(set(getattr(want, f)) <= set(getattr(have, f)) for f in WANT_FIELDS)
