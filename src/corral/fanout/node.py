"""`corral node converge`: on a compute node, the snapshot's node-local deploys against this machine
(pyinfra @local, as root, the same operations as over SSH), and the node's result printed as
CORRAL-RESULT lines (compressed JSON in chunks of lines under 1 KiB: srun merges the nodes' output line by line, a longer
line in pieces)."""

from __future__ import annotations

import base64
import json
import os
import resource
import zlib
from collections.abc import Callable, Iterable

from corral.errors import CorralError

MARK = "CORRAL-RESULT"
CHUNK = 800  # + "CORRAL-RESULT <node> i/n ": under 1024 bytes, which slurmstepd never splits (longer lines
# are sent in 1024-byte pieces that srun interleaves with the other nodes' output)


def converge(text: str, node: str) -> dict:
    """The node's result (NodeResult.to_json() plus timing, warnings, duration_s, cpu_s)."""
    from corral.deploy.context import gather
    from corral.engine import run
    from corral.fanout.snapshot import load, node_local

    cluster, snap = load(text)
    if node not in {n.name for n in cluster.nodes}:
        raise CorralError("this node is not in the snapshot's spec", value=node,
                          fix="run corral fanout from the control host with the spec that names this node")
    deploys = [node_local()[name] for name in snap["deploys"]]
    result = run(cluster, deploys, mode=snap["mode"], limit=[node], local=True, record=False,
                 command="node converge", prepare=gather(cluster))
    out = result.nodes[node].to_json()
    out.update(timing=result.timing, warnings=result.warnings, duration_s=_age(), cpu_s=_cpu())
    return out


def _cpu() -> float:
    """CPU seconds of this process since it started (Python's start and imports included)."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return round(r.ru_utime + r.ru_stime, 3)


def _age() -> float | None:
    """Seconds since this process started (/proc: its start and the uptime, both since boot)."""
    try:
        with open("/proc/self/stat") as f:
            start = int(f.read().rsplit(")", 1)[1].split()[19]) / os.sysconf("SC_CLK_TCK")
        with open("/proc/uptime") as f:
            return round(float(f.read().split()[0]) - start, 3)
    except (OSError, ValueError, IndexError):
        return None


def failure(node: str, message: str) -> dict:
    return {"node": node, "reachable": True, "ok": False, "error": message, "error_kind": "node-converge", "ops": []}


def emit(node: str, data: dict, write: Callable[[str], None] = print) -> None:
    packed = base64.b64encode(zlib.compress(json.dumps(data, sort_keys=True).encode(), 6)).decode()
    chunks = [packed[i:i + CHUNK] for i in range(0, len(packed), CHUNK)] or [""]
    for i, chunk in enumerate(chunks, 1):
        write(f"{MARK} {node} {i}/{len(chunks)} {chunk}")


def collect(lines: Iterable[str]) -> tuple[dict[str, dict], list[str]]:
    """({node: result} of the complete results among `lines`, [other lines]); a node whose chunks are
    not all there, or do not decode, is left out (the caller names it as missing)."""
    parts: dict[str, dict[int, str]] = {}
    totals: dict[str, int] = {}
    other: list[str] = []
    for line in lines:
        words = line.strip().split(" ")
        if len(words) == 4 and words[0] == MARK and "/" in words[2]:
            i, _, n = words[2].partition("/")
            if i.isdigit() and n.isdigit():
                parts.setdefault(words[1], {})[int(i)] = words[3]
                totals[words[1]] = int(n)
                continue
        if line.strip():
            other.append(line.rstrip())
    out: dict[str, dict] = {}
    for node, got in parts.items():
        if sorted(got) != list(range(1, totals[node] + 1)):
            continue
        try:
            data = json.loads(zlib.decompress(base64.b64decode("".join(got[i] for i in sorted(got)))))
        except (ValueError, zlib.error):
            continue
        if isinstance(data, dict) and data.get("node") == node:
            out[node] = data
    return out, other


def main(path: str, node: str) -> int:
    """Never raises: a failure is this node's result. Exit 0 when the node converged."""
    try:
        with open(path, encoding="utf-8") as f:
            data = converge(f.read(), node)
    except CorralError as exc:
        data = failure(node, str(exc))
    except OSError as exc:
        data = failure(node, f"cannot read the snapshot {path}: {exc.strerror}")
    except Exception as exc:  # noqa: BLE001 - the control host must hear of it
        data = failure(node, f"corral node converge failed: {type(exc).__name__}: {exc}")
    emit(node, data)
    return 0 if data.get("ok") else 1
