"""`ibnetdiscover` (infiniband-diags) output -> the fabric's switches, host channel adapters and links
(pure). The format is rdma-core's infiniband-diags/ibnetdiscover.c: per node a block of id lines
(vendid=, devid=, sysimgguid=, switchguid=/caguid=), a node line (`Switch\t<ports> "S-<guid>"\t\t#
"<description>" enhanced port 0 lid <n> lmc 0` or `Ca\t<ports> "H-<guid>"\t\t# "<description>"`), then one
line per connected port (`[<port>][ext <n>]...\t"<S|H|R>-<remote guid>"[<remote port>]... # ...
"<remote description>" lid <n> <width><speed>`). `-g` (grouping) adds Chassis sections and `[ext N]`
marks: both are read and ignored. A host's name is the first word of its HCA's description, without a
domain ("gpu07.cluster.example.com mlx5_0" -> gpu07), as Linux sets it (hostname, then the device)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from corral.errors import CorralError

_NODE = re.compile(r'^(?P<kind>Switch|Ca|Rt)\s+(?P<ports>\d+)\s+"(?P<t>[SHR?])-(?P<guid>[0-9a-f]+)"\s*#\s*"(?P<desc>[^"]*)"')
_PORT = re.compile(r'^\[(?P<port>\d+)\](?:\[ext \d+\])?(?:\((?P<pguid>[0-9a-f]+)\))?\s+'
                   r'"(?P<t>[SHR?])-(?P<guid>[0-9a-f]+)"\[(?P<rport>\d+)\](?:\[ext \d+\])?'
                   r'(?:\s*\((?P<rpguid>[0-9a-f]+)\))?\s*#(?P<comment>.*)$')
_RATE = re.compile(r"\b(\d+x)([A-Z0-9?]+)\s*(?:s=\d+ w=\d+ v=\d+)?\s*(?:slot \d+|\(scp\))?\s*$")
_KIND = {"S": "switch", "H": "ca", "R": "router", "?": "unknown"}


@dataclass(frozen=True)
class Link:
    port: int
    remote: str        # the remote node's guid
    remote_kind: str   # switch, ca, router
    remote_port: int
    rate: str          # e.g. 4xNDR ("" when not printed)


@dataclass
class IbNode:
    kind: str          # switch, ca, router
    guid: str
    desc: str
    links: dict[int, Link] = field(default_factory=dict)

    @property
    def host(self) -> str:
        """A CA's host name (the description's first word, no domain)."""
        word = self.desc.split()[0] if self.desc.split() else ""
        return word.split(".")[0].lower()


@dataclass
class Fabric:
    nodes: dict[str, IbNode] = field(default_factory=dict)  # guid -> node

    def of(self, kind: str) -> list[IbNode]:
        return [n for n in self.nodes.values() if n.kind == kind]


def parse(text: str) -> Fabric:
    """The fabric ibnetdiscover printed. A port line before any node, or a file naming no node at all, is
    refused (CorralError with the line)."""
    fabric, cur = Fabric(), None
    for no, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#") or "=" in line.split()[0] or line.startswith(("Chassis", "Hostname:")):
            continue
        m = _NODE.match(line)
        if m:
            kind = {"Switch": "switch", "Ca": "ca", "Rt": "router"}[m["kind"]]
            cur = fabric.nodes.setdefault(m["guid"], IbNode(kind, m["guid"], m["desc"].strip()))
            continue
        p = _PORT.match(line)
        if p and cur is not None:
            rate = _RATE.search(p["comment"])
            cur.links[int(p["port"])] = Link(int(p["port"]), p["guid"], _KIND[p["t"]], int(p["rport"]),
                                             "".join(rate.groups()) if rate else "")
            continue
        raise CorralError(f"ibnetdiscover output line {no} is not understood", value=line[:120],
                          fix="run `ibnetdiscover` (infiniband-diags) without options other than -g, and give "
                              "its whole output")
    if not fabric.nodes:
        raise CorralError("the ibnetdiscover output names no switch or HCA", value=text[:80],
                          fix="run ibnetdiscover on a node with an active InfiniBand port")
    return fabric


CACHE = "fabric/ibnetdiscover.json"  # in the state dir: node -> the last output read there


def load_fabric_cache(state_dir: str | Path) -> dict[str, str]:
    try:
        data = json.loads((Path(state_dir) / CACHE).read_text())
    except (OSError, ValueError):
        return {}
    return {str(k): v for k, v in data.items() if isinstance(v, str)} if isinstance(data, dict) else {}


def save_fabric_cache(state_dir: str | Path, outputs: dict[str, str]) -> None:
    path = Path(state_dir) / CACHE
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(outputs, indent=1, sort_keys=True))
    tmp.replace(path)
