"""Slurm-style hostlist and address-range expansion (pure)."""

from __future__ import annotations

import ipaddress
import re

import hostlist

NAME_RE = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")
MAX_EXPANSION = 100_000


class RangeError(ValueError):
    """A hostlist or address range that cannot be expanded; the message says why."""


def expand_names(expr: str) -> list[str]:
    """Expand `gpu[01-16],login1` to names; each must be a valid lowercase hostname."""
    try:
        names = hostlist.expand_hostlist(expr)
    except hostlist.BadHostlist as exc:
        raise RangeError(f"bad hostlist {expr!r}: {exc}") from None
    if not names:
        raise RangeError(f"hostlist {expr!r} names no host")
    if len(names) > MAX_EXPANSION:
        raise RangeError(f"hostlist {expr!r} expands to {len(names)} names (max {MAX_EXPANSION})")
    for name in names:
        if not NAME_RE.match(name):
            raise RangeError(f"{name!r} is not a valid node name (lowercase letters, digits, '-')")
    return names


def compress_names(names: list[str]) -> str:
    """Inverse of expand_names: `gpu01,gpu02,gpu03` -> `gpu[01-03]`."""
    return hostlist.collect_hostlist(names)


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
        try:
            items = hostlist.expand_hostlist(text)
        except hostlist.BadHostlist as exc:
            raise RangeError(f"bad address list {text!r}: {exc}") from None
        if len(items) > MAX_EXPANSION:
            raise RangeError(f"address list {text!r} is too large")
        return [str(_ip(item)) for item in items]
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
        if end.version != start.version or int(end) < int(start):
            raise RangeError(f"address range {text!r} ends before it starts")
        if int(end) - int(start) >= MAX_EXPANSION:
            raise RangeError(f"address range {text!r} is too large")
        return [str(ipaddress.ip_address(i)) for i in range(int(start), int(end) + 1)]
    return [str(_ip(text))]
