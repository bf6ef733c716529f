"""Slurm-style hostlist and address-range expansion (pure)."""

from __future__ import annotations

import ipaddress
import re

import hostlist

NAME_RE = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")
MAX_EXPANSION = 100_000


class RangeError(ValueError):
    """A hostlist or address range that cannot be expanded; the message says why."""


def _expand(expr: str, what: str) -> list[str]:
    """hostlist.expand_hostlist, keeping duplicates and bounding the total size while expanding."""
    items: list[str] = []
    for part in _top_level_parts(expr, what):
        try:
            items.extend(hostlist.expand_hostlist(part, allow_duplicates=True))
        except hostlist.BadHostlist as exc:
            raise RangeError(f"bad {what} {expr!r}: {exc}") from None
        if len(items) > MAX_EXPANSION:
            raise RangeError(f"{what} {expr!r} expands to more than {MAX_EXPANSION} items")
    return items


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
        dup = next(n for i, n in enumerate(expanded) if n in expanded[:i])
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
        if int(end) - int(start) >= MAX_EXPANSION:
            raise RangeError(f"address range {text!r} is too large")
        return [str(ipaddress.ip_address(i)) for i in range(int(start), int(end) + 1)]
    return [str(_ip(text))]
