"""Node hardware as Slurm sees it, and the compact node lists the Slurm config files are made of.

NodeHW (facts/records.py) comes from `slurmd -C` (or lscpu) on the node, cached by corral. Everything
here is pure and shared by the slurm.conf and gres.conf renderers.

Hostlists are written only in the one form Slurm and python-hostlist both read the same way: a name
prefix followed by a bracketed range of its trailing number (`gpu[01-16]`, `10.0.0.[11-26]`); each
range's zero padding is the width of its first number, as in Slurm's hostlist.c. python-hostlist's writer
(collect_hostlist, spec/hosts.py's compress_names) is not used for the files: it also folds numbers inside
names (su1-rail,su2-rail -> su[1-2]-rail) and orders one number at two widths otherwise (gpu[1,01]), which
would change every rendered file that has them; and a NodeName/NodeAddr run (node_runs) pairs two lists.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Generic, TypeVar

from corral.facts.records import NodeHW

if TYPE_CHECKING:
    from corral.spec.cluster import Cluster, Node

T = TypeVar("T")
_TRAILING_NUMBER = re.compile(r"^(.*?)(\d+)$")


def real_memory(cluster: Cluster, node: Node, hw: Mapping[str, NodeHW]) -> int | None:
    """RealMemory of a node: the spec's memory_mb, else (virtual cluster) the declared virtual node
    memory (a virtual node sees all of the host's), else what the node reported; None if unknown."""
    if node.memory_mb:
        return node.memory_mb
    if cluster.spec.virtual is not None:
        return cluster.spec.virtual.node_memory_mb
    facts = hw.get(node.name)
    return facts.memory_mb if facts else None


def name_key(name: str) -> tuple[str, int, str]:
    """Natural sort key: gpu2 < gpu10; names without a trailing number sort by name."""
    m = _TRAILING_NUMBER.match(name)
    return (m.group(1), int(m.group(2)), m.group(2)) if m else (name, -1, "")


class _Range:
    """A run prefix + [lo..hi] whose numbers are written zero-padded to the width of lo."""

    __slots__ = ("prefix", "lo", "hi", "width", "lo_text")

    def __init__(self, prefix: str, digits: str) -> None:
        self.prefix, self.lo_text = prefix, digits
        self.lo = self.hi = int(digits)
        self.width = len(digits)

    def extends(self, prefix: str, digits: str) -> bool:
        n = self.hi + 1
        return prefix == self.prefix and int(digits) == n and digits == f"{n:0{self.width}d}"

    def inner(self) -> str:
        return self.lo_text if self.lo == self.hi else f"{self.lo_text}-{self.hi:0{self.width}d}"

    def text(self) -> str:
        return f"{self.prefix}{self.lo_text}" if self.lo == self.hi else f"{self.prefix}[{self.inner()}]"


def _split(text: str) -> tuple[str, str] | None:
    m = _TRAILING_NUMBER.match(text)
    return (m.group(1), m.group(2)) if m else None


def hostlist(names: Iterable[str]) -> str:
    """A Slurm hostlist naming exactly `names` (any order, duplicates dropped): gpu[01-16,18],login1."""
    items: list[str] = []
    cur: _Range | None = None
    group: list[_Range] = []

    def flush_group() -> None:
        if len(group) == 1:
            items.append(group[0].text())
        elif group:
            items.append(f"{group[0].prefix}[{','.join(r.inner() for r in group)}]")
        group.clear()

    for name in sorted(set(names), key=name_key):
        parts = _split(name)
        if parts is None:
            flush_group()
            items.append(name)
            cur = None
            continue
        if cur is not None and cur.extends(*parts):
            cur.hi += 1
            continue
        cur = _Range(*parts)
        if group and group[0].prefix != cur.prefix:
            flush_group()
        group.append(cur)
    flush_group()
    return ",".join(items)


@dataclass
class NodeRun(Generic[T]):
    """Nodes with equal attributes whose names and IPv4 addresses both count up by one."""

    names: _Range | str
    addresses: _Range | str
    attrs: T

    def name_text(self) -> str:
        return self.names if isinstance(self.names, str) else self.names.text()

    def address_text(self) -> str:
        return self.addresses if isinstance(self.addresses, str) else self.addresses.text()


def _ipv4_split(address: str) -> tuple[str, str] | None:
    if ":" in address:
        return None
    prefix, _, last = address.rpartition(".")
    return (prefix + ".", last) if prefix and last.isdigit() else None


def node_runs(nodes: Iterable[tuple[str, str, T]]) -> list[NodeRun[T]]:
    """Merge (name, address, attrs) triples, in the given order, into runs that one
    `NodeName=<names> NodeAddr=<addresses>` line describes: Slurm pairs the two expansions in step."""
    runs: list[NodeRun[T]] = []
    for name, address, attrs in nodes:
        n, a = _split(name), _ipv4_split(address)
        last = runs[-1] if runs else None
        if (last is not None and n and a and last.attrs == attrs and isinstance(last.names, _Range)
                and isinstance(last.addresses, _Range) and last.names.extends(*n)
                and last.addresses.extends(*a) and last.addresses.hi < 255):
            last.names.hi += 1
            last.addresses.hi += 1
            continue
        runs.append(NodeRun(_Range(*n) if n else name,
                            _Range(*a) if a and a[1] == str(int(a[1])) else address, attrs))
    return runs
