"""A Slurm topology from a discovered InfiniBand fabric (facts/ibnetdiscover.py; pure).

Leaves: the switches the spec's compute nodes' HCAs are cabled to. Nodes cabled to the same set of
switches are one Slurm leaf: one switch in a classic fat tree; a rail-optimised fabric cables HCA k of
every node of a scalable unit to the unit's rail switch k, so the unit's nodes share all its rail
switches, and the unit is the leaf (named by the rail switches' common name: su1-rail0..7 -> su1-rail).
Above, the switches that join leaves are one level (redundant spines collapse into one Slurm switch:
Slurm's tree has one parent per switch), and so on up to one top (or several, when the fabric is).
Switch names come from the descriptions (`MF0;leaf01:MQM9700/U1` -> leaf01) and the comment lines of
topology.conf say which switches (and GUIDs) each name stands for."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

from corral.facts.ibnetdiscover import Fabric
from corral.spec.models_topology import Switch

_BAD = re.compile(r"[^a-z0-9_-]+")
_NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,62}")
MAX_LEVELS = 8
OFF_FABRIC = "off-fabric"  # compute nodes the fabric did not show (render/topology.py): a name of its own


@dataclass
class Discovered:
    switches: list[Switch]
    notes: list[str] = field(default_factory=list)    # "<name>: what it stands for"
    missing: list[str] = field(default_factory=list)  # spec compute nodes not on the fabric
    extra: list[str] = field(default_factory=list)    # fabric hosts the spec does not have


def switch_name(desc: str, guid: str) -> str:
    """`MF0;leaf01:MQM9700/U1` -> leaf01; `leaf-7 SX6036` -> leaf-7; else sw-<last 8 hex of the guid>."""
    text = desc.split(";", 1)[1].split(":", 1)[0] if ";" in desc else (desc.split() or [""])[0]
    name = _BAD.sub("-", text.lower()).strip("-_")
    return name if _NAME.fullmatch(name) else f"sw-{guid[-8:]}"


def _group_name(names: list[str]) -> str:
    if len(names) == 1:
        return names[0]
    common = os.path.commonprefix(sorted(names)).rstrip("-_0123456789")
    return common if _NAME.fullmatch(common) else names[0]


def _printable(text: str) -> str:
    return re.sub(r"[^\x20-\x7e]", "?", text)[:100]


def _some(names: list[str]) -> str:
    return ", ".join(names) if len(names) <= 8 else f"{', '.join(names[:6])} and {len(names) - 6} more"


def _unique(name: str, taken: set[str]) -> str:
    out, i = name, 2
    while out in taken:
        out, i = f"{name}-{i}", i + 1
    taken.add(out)
    return out


def discover(fabric: Fabric, compute: list[str]) -> Discovered:
    switches = {n.guid: n for n in fabric.of("switch")}
    names = {g: switch_name(n.desc, g) for g, n in switches.items()}
    wanted, on_fabric = set(compute), set()
    leaf_sets: dict[str, set[str]] = {}
    for ca in fabric.of("ca"):
        if not ca.host:
            continue
        on_fabric.add(ca.host)
        if ca.host in wanted:
            leaf_sets.setdefault(ca.host, set()).update(link.remote for link in ca.links.values()
                                                        if link.remote in switches)
    groups: dict[frozenset[str], list[str]] = {}
    for host, leaves in leaf_sets.items():
        if leaves:
            groups.setdefault(frozenset(leaves), []).append(host)
    taken: set[str] = {OFF_FABRIC}
    out: list[Switch] = []
    notes: list[str] = []
    units: list[tuple[str, set[str]]] = []  # (Slurm name, fabric switches it stands for)
    for leaves, hosts in sorted(groups.items(), key=lambda kv: sorted(names[g] for g in kv[0])):
        label = sorted(names[g] for g in leaves)
        name = _unique(_group_name(label), taken)
        out.append(Switch(name=name, nodes=",".join(sorted(hosts))))
        notes.append(f"{name}: " + (f"{_printable(switches[next(iter(leaves))].desc)} (0x{next(iter(leaves))})"
                                    if len(leaves) == 1 else f"{len(leaves)} rail switches {_some(label)} (every "
                                                             "node of it on each)"))
        units.append((name, set(leaves)))
    used = {g for _, s in units for g in s}
    for _ in range(MAX_LEVELS):
        if len(units) < 2:
            break
        up = [{link.remote for g in s for link in switches[g].links.values()
               if link.remote in switches and link.remote not in used} for _, s in units]
        if not any(up):
            break
        parent = list(range(len(units)))

        def find(i: int) -> int:
            while parent[i] != i:
                parent[i] = parent[parent[i]]
                i = parent[i]
            return i
        for i in range(len(units)):
            for j in range(i + 1, len(units)):
                if up[i] & up[j]:
                    parent[find(i)] = find(j)
        merged: dict[int, list[int]] = {}
        for i in range(len(units)):
            merged.setdefault(find(i), []).append(i)
        nxt = []
        for members in sorted(merged.values()):
            uplinks = set().union(*(up[i] for i in members))
            if len(members) == 1 and not uplinks:
                nxt.append(units[members[0]])
                continue
            label = sorted(names[g] for g in uplinks)
            name = _unique(_group_name(label), taken)
            out.append(Switch(name=name, switches=[units[i][0] for i in members]))
            notes.append(f"{name}: {_some(label)}")
            nxt.append((name, uplinks))
            used |= uplinks
        if len(nxt) == len(units) and all(a[0] == b[0] for a, b in zip(nxt, units)):
            break
        units = nxt
    return Discovered(out, notes, missing=sorted(wanted - on_fabric),
                      extra=sorted(on_fabric - wanted))
