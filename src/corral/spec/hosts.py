"""Slurm-style hostlist and address-range expansion (pure).

Hostlists are counted before they are expanded (count_names, count_addresses), so that a short
expression cannot make a long list; the limit is corral.limits' max_nodes."""

from __future__ import annotations

import ipaddress
import re

import hostlist

from corral import limits

NAME_RE = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")
MAX_EXPANSION = limits.DEFAULTS.max_nodes  # the default; limits.current().max_nodes is enforced
PART_RE = re.compile(r"([^,\[]*)(\[[^\]]*\])?")  # prefix, [rangelist]: how python-hostlist splits a part
MAX_BRACKETS = 32  # bracket groups in one name (python-hostlist recurses once per group)


class RangeError(ValueError):
    """A hostlist or address range that cannot be expanded; the message says why."""


def _expand(expr: str, what: str) -> list[str]:
    """hostlist.expand_hostlist, keeping duplicates; the size is checked before expanding."""
    parts = _top_level_parts(expr, what)
    limit = limits.current().max_nodes
    if _count(expr, what, parts) > limit:
        raise RangeError(f"{what} {expr!r} expands to more than {limit} items")
    items: list[str] = []
    for part in parts:
        try:
            items.extend(hostlist.expand_hostlist(part, allow_duplicates=True))
        except hostlist.BadHostlist as exc:
            raise RangeError(f"bad {what} {expr!r}: {exc}") from None
    return items


def _count(expr: str, what: str, parts: list[str] | None = None) -> int:
    """How many items `expr` expands to, found without expanding it; RangeError if it is malformed."""
    total = 0
    for part in _top_level_parts(expr, what) if parts is None else parts:
        try:
            total += _count_part(part)
        except hostlist.BadHostlist as exc:
            raise RangeError(f"bad {what} {expr!r}: {exc}") from None
    return total


def _count_part(part: str) -> int:
    """The size of hostlist.expand_part(part), raising the BadHostlist it would raise."""
    groups = [m.group(2)[1:-1] for m in PART_RE.finditer(part) if m.group(2) is not None]
    if len(groups) > MAX_BRACKETS:
        raise hostlist.BadHostlist(f"more than {MAX_BRACKETS} bracket groups in one name")
    size = 1
    for rangelist in reversed(groups):  # python-hostlist expands the rightmost group first
        own = sum(_count_range(r) for r in rangelist.split(","))
        if own * size > hostlist.MAX_SIZE:
            raise hostlist.BadHostlist("results too large")
        size *= own
    return size


def _count_range(text: str) -> int:
    m = re.match(r"^([0-9]+)(?:-([0-9]+))?$", text)
    if not m:
        raise hostlist.BadHostlist("bad range")
    if m.group(2) is None:
        return 1
    if max(len(m.group(1).lstrip("0")), len(m.group(2).lstrip("0"))) > 20:  # int() of 5000 digits is slow
        raise hostlist.BadHostlist("range too large")
    low, high = int(m.group(1)), int(m.group(2))
    if high < low:
        raise hostlist.BadHostlist("start > stop")
    if high - low > hostlist.MAX_SIZE:
        raise hostlist.BadHostlist("range too large")
    return high - low + 1


def count_names(expr: str) -> int:
    """How many names expand_names(expr) lists at most (duplicates counted), without expanding.

    RangeError if it is malformed; no limit is applied."""
    return _count(expr, "hostlist")


def _top_level_parts(expr: str, what: str) -> list[str]:
    parts, depth, cur = [], 0, ""
    for c in expr:
        if c == "," and depth == 0:
            parts.append(cur)
            cur = ""
            continue
        cur += c
        depth += (c == "[") - (c == "]")
        if depth not in (0, 1):
            raise RangeError(f"bad {what} {expr!r}: {'nested' if depth > 1 else 'unbalanced'} brackets")
    if depth:
        raise RangeError(f"bad {what} {expr!r}: unbalanced brackets")
    parts.append(cur)
    return [p for p in parts if p]


def expand_names(expr: str, *, unique: bool = False) -> list[str]:
    """Expand `gpu[01-16],login1` to names; each must be a valid lowercase hostname.

    A name given twice is listed once, or with unique=True is an error.
    """
    expanded = _expand(expr, "hostlist")
    names = list(dict.fromkeys(expanded))
    if unique and len(names) != len(expanded):
        seen: set[str] = set()
        dup = next(n for n in expanded if n in seen or seen.add(n))  # type: ignore[func-returns-value]
        raise RangeError(f"hostlist {expr!r} names {dup!r} more than once")
    if not names:
        raise RangeError(f"hostlist {expr!r} names no host")
    for name in names:
        if not NAME_RE.match(name):
            raise RangeError(f"{name!r} is not a valid node name (lowercase letters, digits, '-')")
    return names


def compress_names(names: list[str]) -> str:
    """Inverse of expand_names: `gpu01,gpu02,gpu03` -> `gpu[01-03]`."""
    try:
        return hostlist.collect_hostlist(names)
    except hostlist.BadHostlist as exc:
        raise RangeError(f"cannot write {names!r} as a hostlist: {exc}") from None


def _ip(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    try:
        return ipaddress.ip_address(text.strip())
    except ValueError:
        raise RangeError(f"{text.strip()!r} is not an IP address") from None


def expand_addresses(spec: str | list[str]) -> list[str]:
    """Expand addresses given as a list, a hostlist (`10.0.0.[11-26]`) or a range.

    Ranges: `10.0.0.11-10.0.0.26` or `10.0.0.11-26` (last octet). A single address is a list of one.
    """
    if isinstance(spec, list):
        return [str(_ip(str(item))) for item in spec]
    text = spec.strip()
    if "[" in text:
        return [str(_ip(item)) for item in _expand(text, "address list")]
    if "," in text:
        return [str(_ip(item)) for item in text.split(",")]
    if "-" in text:
        start, end = _address_range(text)
        return [str(ipaddress.ip_address(i)) for i in range(start, end + 1)]
    return [str(_ip(text))]


def count_addresses(spec: str | list[str]) -> int:
    """How many addresses expand_addresses(spec) gives, found without expanding; RangeError as it."""
    if isinstance(spec, list):
        return len(spec)
    text = spec.strip()
    if "[" in text:
        return _count(text, "address list")  # no limit: expand_addresses applies it
    if "," in text:
        return text.count(",") + 1
    if "-" in text:
        start, end = _address_range(text)
        return end - start + 1
    return 1


def _address_range(text: str) -> tuple[int, int]:
    """The first and last address of `10.0.0.11-10.0.0.26` or `10.0.0.11-26`, as integers."""
    start_text, end_text = text.split("-", 1)
    start = _ip(start_text)
    if "." in end_text or ":" in end_text:
        end = _ip(end_text)
    else:
        if start.version != 4 or not end_text.strip().isdigit():
            raise RangeError(f"bad address range {text!r}")
        end = _ip(start_text.rsplit(".", 1)[0] + "." + end_text.strip())
    if end.version != start.version:
        raise RangeError(f"address range {text!r} mixes IPv4 and IPv6")
    if int(end) < int(start):
        raise RangeError(f"address range {text!r} ends before it starts")
    if int(end) - int(start) >= limits.current().max_nodes:
        raise RangeError(f"address range {text!r} is too large")
    return int(start), int(end)
