"""`corral spec show`'s text form: the sections `--json` prints (Cluster.expanded()), laid out to read:
a title line, the nodes as a table, then every other section as YAML under its name, in the model's
order. One source for both forms, so the text cannot show less than the JSON."""

from __future__ import annotations

import io
from typing import Any

from rich.table import Table
from ruamel.yaml import YAML

HEAD = ("name", "scheduler", "nodes", "state_dir", "spec_hash")  # in the title and the table


def _unset(value: Any) -> Any:
    """None as the word `unset` (YAML would print nothing)."""
    if isinstance(value, dict):
        return {k: _unset(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_unset(v) for v in value]
    return "unset" if value is None else value


def _yaml(value: Any) -> str:
    yaml = YAML(typ="rt")  # keeps the model's key order (the safe dumper sorts)
    yaml.default_flow_style = False
    yaml.width = 100
    buf = io.StringIO()
    yaml.dump(_unset(value), buf)
    return buf.getvalue()


def node_table(data: dict) -> Table:
    table = Table(title=f"{data['name']} ({data['scheduler']}): {len(data['nodes'])} nodes")
    for col in ("node", "address", "roles", "gpus", "memory MB"):
        table.add_column(col)
    for n in data["nodes"]:
        g = n["gpus"]
        table.add_row(n["name"], n["address"], ",".join(n["roles"]), f"{g['count']} x {g['model']}" if g else "-",
                      str(n["memory_mb"] or "facts"))
    return table


def sections_text(data: dict) -> str:
    """Every section but the title's and the table's: `key: value` for a scalar, else the key and its
    YAML indented under it (None: `key: unset`)."""
    lines = []
    for key, value in data.items():
        if key in HEAD:
            continue
        if value is None:
            lines.append(f"{key}: unset")
        elif isinstance(value, (dict, list)) and value:
            lines.append(f"{key}:")
            lines += ["  " + line for line in _yaml(value).rstrip("\n").splitlines()]
        else:
            lines.append(_yaml({key: value}).rstrip("\n"))
    lines.append(f"state_dir: {data['state_dir']}")
    lines.append(f"spec_hash: {data['spec_hash']}")
    return "\n".join(lines)
