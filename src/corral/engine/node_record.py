"""The record of the nodes corral deployed: `<state_dir>/deployed-nodes.json` (0600, written aside
then renamed), so that a node taken out of the spec is still known: removed = in the record, not in
the spec (workflows/removal.py drains it, takes it out of Slurm, stops its services).

apply writes it: every spec node the run reached (a node never reached has nothing of corral's to
stop), each with its name, address, roles and the SSH port and user it was reached with; a removal
not finished stays, with what is left to do (`pending`). plan only reads it. A file that is not
corral's record is a located error, never read as "no node": that would forget removed nodes.
"""

from __future__ import annotations

import ipaddress
import json
import re
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path

from corral.engine.inventory import _write_private
from corral.errors import CorralError
from corral.spec.cluster import Cluster, Node

RECORD = "deployed-nodes.json"
VERSION = 1
DRAINED = "drained for removal, still in Slurm"          # `pending`: what an unfinished removal left
SERVICES_LEFT = "removed from Slurm, services not stopped"
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,252}$")


@dataclass(frozen=True)
class Deployed:
    name: str
    address: str
    roles: tuple[str, ...]
    ssh_port: int
    ssh_user: str
    pending: str | None = None  # a removal left unfinished: what is left ("services not stopped")

    def node(self) -> Node:
        """A Node to reach it by (engine/remote.py), though the spec no longer has it."""
        return Node(name=self.name, address=self.address, roles=self.roles, gpus=None, memory_mb=None, group=-1)


def record_path(state_dir: Path) -> Path:
    return Path(state_dir) / RECORD


def _bad(path: Path, what: str) -> CorralError:
    return CorralError(f"corral's record of deployed nodes is unreadable: {what}", where=str(path),
                       fix=f"restore {path.name} from a backup (corral backup keeps it), or remove it: corral then "
                           "forgets which nodes it deployed (a node already taken out of the spec is no longer "
                           "drained nor stopped by apply)")


def _word(value: object) -> bool:
    """A name, role or user as corral writes them: never an option (-x) nor shell."""
    return isinstance(value, str) and bool(NAME.match(value))


def _address(value: object) -> bool:
    """An IP address, as the spec's addresses are (spec/hosts.py)."""
    try:
        return isinstance(value, str) and str(ipaddress.ip_address(value)) == value
    except ValueError:
        return False


def _entry(path: Path, name: str, raw: object) -> Deployed:
    if not isinstance(raw, dict) or not _word(name):
        raise _bad(path, f"entry {str(name)[:40]!r} is not a node")
    try:
        address, roles, port, user = raw["address"], raw["roles"], raw["ssh_port"], raw["ssh_user"]
    except KeyError as exc:
        raise _bad(path, f"node {name!r} lacks {exc}") from None
    pending = raw.get("pending")
    if not (_address(address) and isinstance(roles, list) and all(_word(r) for r in roles) and _word(user)
            and type(port) is int and 0 < port < 65536
            and (pending is None or isinstance(pending, str) and pending.isprintable())):
        raise _bad(path, f"node {name!r} has a bad address, role, port, user or pending step")
    return Deployed(name, address, tuple(roles), port, user, pending)


def read(state_dir: Path) -> dict[str, Deployed]:
    """The record (empty before the first apply that wrote one)."""
    path = record_path(state_dir)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError) as exc:
        raise _bad(path, str(exc)) from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise _bad(path, f"not JSON ({exc.msg}, line {exc.lineno})") from None
    if not isinstance(data, dict) or data.get("version") != VERSION or not isinstance(data.get("nodes"), dict):
        raise _bad(path, f"not a version {VERSION} record")
    return {name: _entry(path, name, raw) for name, raw in data["nodes"].items()}


def write(state_dir: Path, record: dict[str, Deployed]) -> None:
    nodes = {name: {k: v for k, v in asdict(d).items() if k != "name" and (k != "pending" or v)}
             for name, d in sorted(record.items())}
    _write_private(record_path(state_dir), json.dumps({"version": VERSION, "nodes": nodes}, indent=1) + "\n")


def entry(cluster: Cluster, node: Node, pending: str | None = None) -> Deployed:
    ssh = cluster.spec.ssh
    return Deployed(node.name, node.address, tuple(node.roles), int(ssh.port), str(ssh.user), pending)


def removed(cluster: Cluster, record: dict[str, Deployed]) -> list[Deployed]:
    """Nodes in the record that the spec no longer has, in the record's (name) order."""
    names = {n.name for n in cluster.nodes}
    return [d for name, d in sorted(record.items()) if name not in names]


def updated(cluster: Cluster, record: dict[str, Deployed], reached: Iterable[str],
            removals: dict[str, str | None]) -> dict[str, Deployed]:
    """The record after an apply: spec nodes it reached, or had reached before, as the spec has them now;
    removed nodes: gone when their removal finished (None in `removals`), else kept with what is left
    (a node not in `removals`, e.g. a run with --limit, is kept as it was)."""
    reached = set(reached)
    out = {n.name: entry(cluster, n) for n in cluster.nodes if n.name in reached or n.name in record}
    for d in removed(cluster, record):
        if d.name not in removals:
            out[d.name] = d
        elif removals[d.name] is not None:
            out[d.name] = Deployed(d.name, d.address, d.roles, d.ssh_port, d.ssh_user, removals[d.name])
    return out


def forget(state_dir: Path, name: str) -> bool:
    """Drop a removed node whose Slurm side is done (`corral trust --forget`: gone for good, its services
    can no longer be stopped). Whether it was dropped."""
    record = read(state_dir)
    if name not in record or record[name].pending != SERVICES_LEFT:
        return False
    write(state_dir, {k: v for k, v in record.items() if k != name})
    return True


def save_if_changed(state_dir: Path, before: dict[str, Deployed], after: dict[str, Deployed]) -> None:
    if after != before or not record_path(state_dir).exists():
        write(state_dir, after)
