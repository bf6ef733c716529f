"""InfiniBand / RoCE ports from /sys/class/infiniband/<hca>/ports/<n>/ (no infiniband-diags needed).

Formats (Linux drivers/infiniband/core/sysfs.c): state `"%d: %s"` (4: ACTIVE, 1: DOWN ...),
phys_state `"%u: %s"` (5: LinkUp, 3: Disabled, 2: Polling ...), rate `"%d%s Gb/sec (%dX%s)"`
(400 Gb/sec (4X NDR); a half is printed as .5: 2.5 Gb/sec (1X SDR)), link_layer InfiniBand or Ethernet.
"""

from __future__ import annotations

import re
from pathlib import Path

from pyinfra.api import FactBase, QuoteString, StringCommand

from corral.errors import CorralError

PORT_FILES = ("state", "phys_state", "rate", "link_layer")
_PATH = re.compile(r"^(?:.*/)?sys/class/infiniband/(?P<hca>[^/]+)/ports/(?P<port>\d+)/(?P<file>[a-z_]+)$")
_RATE = re.compile(r"^(?P<gbps>\d+(?:\.5)?) Gb/sec \((?P<width>\d+)X ?(?P<speed>[A-Z0-9]*)\)$")
_STATE = re.compile(r"^(\d+): (.+)$")


def _state(value: str) -> str:
    m = _STATE.match(value)
    return m[2] if m else value


def parse_rate(value: str) -> dict:
    """'400 Gb/sec (4X NDR)' -> {"gbps": 400.0, "width": 4, "speed": "NDR"}."""
    m = _RATE.match(value.strip())
    if not m:
        raise CorralError("unexpected InfiniBand port rate", value=value.strip()[:80],
                          fix="expected the kernel's format, e.g. '400 Gb/sec (4X NDR)'")
    return {"gbps": float(m["gbps"]), "width": int(m["width"]), "speed": m["speed"]}


def parse_ib_ports(lines: list[str]) -> list[dict]:
    """`<path><TAB><content>` lines (the fact's output; also the fixture format) ->
    [{hca, port, state, phys_state, rate, gbps, link_layer}] sorted by (hca, port). state and
    phys_state are the names (ACTIVE, LinkUp); rate keeps the kernel's text, gbps its number."""
    ports: dict[tuple[str, int], dict] = {}
    for line in filter(None, (ln.rstrip("\n") for ln in lines)):
        path, sep, value = line.partition("\t")
        m = _PATH.match(path)
        if not sep or not m:
            raise CorralError("unexpected InfiniBand sysfs line (want `<path>\\t<value>`)", value=line[:120],
                              fix="check /sys/class/infiniband/*/ports/* on the node")
        if m["file"] not in PORT_FILES:
            continue
        port = ports.setdefault((m["hca"], int(m["port"])), {"hca": m["hca"], "port": int(m["port"])})
        port[m["file"]] = value.strip()
    out = []
    for key in sorted(ports):
        p = ports[key]
        missing = [f for f in PORT_FILES if f not in p]
        if missing:
            raise CorralError(f"InfiniBand port {p['hca']}/{p['port']} lacks {', '.join(missing)}",
                              fix="check the port directory in /sys/class/infiniband")
        out.append({"hca": p["hca"], "port": p["port"], "state": _state(p["state"]),
                    "phys_state": _state(p["phys_state"]), "rate": p["rate"],
                    "gbps": parse_rate(p["rate"])["gbps"], "link_layer": p["link_layer"]})
    return out


class InfinibandPorts(FactBase):
    """Every port of every RDMA device -> parse_ib_ports()'s list ([] on a node without any).
    `root` prefixes /sys (for tests on a fixture tree)."""

    def command(self, root: str = "") -> StringCommand:
        globs = [StringCommand(QuoteString(root), f"/sys/class/infiniband/*/ports/*/{name}", _separator="")
                 for name in PORT_FILES]  # no {a,b} brace expansion: pyinfra runs sh, not bash
        return StringCommand(
            "for f in", *globs,
            """; do [ -r "$f" ] && printf '%s\\t%s\\n' "$f" "$(cat "$f")"; done; true""")

    def process(self, output: list[str]) -> list[dict]:
        return parse_ib_ports(output)

    @staticmethod
    def default() -> list[dict]:
        return []


def materialise_tree(text: str, root: Path) -> Path:
    """Write a fixture tree (`<relative path><TAB><content>` per line, `#` comments) under root; for
    tests that run a fact's command against a fake /sys. Returns root."""
    for line in text.splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        rel, _, content = line.partition("\t")
        if rel.startswith("/") or ".." in Path(rel).parts:
            raise CorralError("fixture tree paths must be relative", value=rel)
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content + "\n")
    return root
