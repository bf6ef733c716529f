"""Bounds on what `corral import deepops` reads: Ansible host ranges counted before they are expanded,
and the bytes, hosts and groups of one config directory (limits in corral.limits).

A limit hit is a SpecError at once (file or file:line), without reading or expanding further."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from corral import limits
from corral.errors import Problem, SpecError
from corral.spec.yaml_guard import FileTooLarge, read_bounded

RANGE_RE = re.compile(r"\[([0-9a-z]+):([0-9a-z]+)(?::(\d+))?\]")
MAX_DIGITS = 18  # in one bound or step of a range: far beyond any host count


def _items(m: re.Match[str], *, count_only: bool = False) -> list[str] | int:
    """The values of one `[start:end(:step)]`, or only how many; ValueError if bad or empty."""
    start, end, step_text = m.group(1), m.group(2), m.group(3) or "1"
    if max(len(start.lstrip("0")), len(end.lstrip("0")), len(step_text.lstrip("0"))) > MAX_DIGITS:
        raise ValueError(f"host range {m.group(0)} is too large")
    step = max(int(step_text), 1)
    if start.isdigit() and end.isdigit():
        lo, hi, width = int(start), int(end), len(start) if start.startswith("0") else 0
        make = (lambda i: str(i).zfill(width))  # noqa: E731
    elif len(start) == len(end) == 1 and start.isalpha() and end.isalpha():
        lo, hi, make = ord(start), ord(end), chr
    else:
        lo, hi, make = 1, 0, str
    n = (hi - lo) // step + 1 if hi >= lo else 0
    if not n:
        raise ValueError(f"bad or empty host range {m.group(0)}")
    return n if count_only else [make(i) for i in range(lo, hi + 1, step)]


def count_pattern(name: str) -> int:
    """How many hosts expand_pattern(name) gives, without expanding; ValueError as it raises."""
    if "[" in RANGE_RE.sub("", name) or "]" in RANGE_RE.sub("", name):
        raise ValueError(f"bad host range in {name}: a bracket that is not part of [start:end]")
    total = 1
    for m in RANGE_RE.finditer(name):
        total *= _items(m, count_only=True)  # type: ignore[assignment]
    return total


def expand_pattern(name: str) -> list[str]:
    """Ansible host ranges: `gpu[01:04]`, `node[a:c]`, `n[0:10:2]` (several in one name multiply)."""
    count_pattern(name)
    out, pos = [""], 0
    for m in RANGE_RE.finditer(name):
        items = _items(m)
        out = [o + name[pos:m.start()] + i for o in out for i in items]  # type: ignore[union-attr]
        pos = m.end()
    return [o + name[pos:] for o in out]


@dataclass
class ImportBudget:
    """What is left of the limits while one config directory is read."""

    lim: limits.Limits = field(default_factory=limits.current)
    bytes_read: int = 0
    mentions: int = 0  # hosts named, counting a host once per line that names it

    def read(self, path: Path) -> str:
        """The text of path, if it fits in what is left of max_import_bytes (checked before reading)."""
        try:
            text = read_bounded(path, self.lim.max_import_bytes - self.bytes_read)
        except FileTooLarge as exc:
            raise self._error(str(path), "the DeepOps config files are larger than "
                              f"{self.lim.max_import_bytes} bytes in all", self.bytes_read + exc.size,
                              "max_import_bytes", "remove files the import does not need") from None
        self.bytes_read += len(text.encode("utf-8"))
        return text

    def hosts(self, full: Callable[[str], str], where: str, name: str, count: int, known: int) -> None:
        """Before expanding `name` (count hosts) on inventory line `where` (full(where) locates it), and
        after (count 0); `known` hosts in the inventory so far."""
        self.mentions += count
        limit = self.lim.max_import_hosts
        if max(count, known) > limit:
            raise self._error(full(where), f"more than {limit} hosts in the inventory", name,
                              "max_import_hosts", "import a smaller inventory")
        if self.mentions > limits.IMPORT_MENTIONS_PER_HOST * limit:
            raise self._error(full(where), "the inventory names hosts more than "
                              f"{limits.IMPORT_MENTIONS_PER_HOST * limit} times in all", name,
                              "max_import_hosts", "name each host in fewer groups")

    def groups(self, full: Callable[[str], str], where: str, name: str, count: int) -> None:
        if count > self.lim.max_import_groups:
            raise self._error(full(where), f"more than {self.lim.max_import_groups} groups in the inventory",
                              name, "max_import_groups", "import a smaller inventory")

    @staticmethod
    def _error(where: str, message: str, value: object, limit: str, fix: str) -> SpecError:
        return SpecError([Problem(where, message, value, f"{fix} or {limits.raise_hint(limit)}")])
