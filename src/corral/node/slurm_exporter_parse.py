"""Pure parsers of Slurm command output for corral's Slurm exporter (stdlib only).

Slurm's `-O` format fields are stable from 20.x to 24.x; the `--json` schema is not (v0.0.38 in
22.05, v0.0.39/40 later), so the exporter asks for `|`-separated fields.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

SINFO_FORMAT = "NodeList:|,StateLong:|,Partition:|,Gres:|,GresUsed:|,Reason:"
SQUEUE_FORMAT = "JobID:|,State:|,Partition:|,Account:|,Reason:|,NumNodes:|,tres-alloc:"
NODE_STATES = ("idle", "alloc", "mix", "drain", "down", "other")
UNAVAILABLE = ("drain", "down", "other")


def normalize_state(state: str) -> str:
    """Slurm's StateLong (idle, mixed, allocated, draining, drained, down*, mixed+drain...) ->
    idle | alloc | mix | drain | down | other."""
    s = state.strip().lower().rstrip("*~#!%$@^-")
    if "down" in s:
        return "down"
    if "drain" in s:
        return "drain"
    base = s.split("+")[0]
    return {"idle": "idle", "allocated": "alloc", "alloc": "alloc", "mixed": "mix", "mix": "mix",
            "completing": "alloc"}.get(base, "other")


def parse_gres(text: str) -> dict[str, int]:
    """'gpu:h100:8(S:0-1),shard:8' -> {'h100': 8}; untyped 'gpu:4' -> {'untyped': 4}; '(null)' -> {}."""
    out: dict[str, int] = {}
    for item in re.split(r",(?![^(]*\))", text.strip()):
        item = re.sub(r"\(.*\)$", "", item.strip())
        parts = item.split(":")
        if parts[0] != "gpu" or len(parts) < 2:
            continue
        if len(parts) == 2 and parts[1].isdigit():
            out["untyped"] = out.get("untyped", 0) + int(parts[1])
        elif len(parts) >= 3 and parts[2].isdigit():
            out[parts[1]] = out.get(parts[1], 0) + int(parts[2])
    return out


@dataclass
class SlurmNode:
    name: str
    state: str                        # normalized
    responding: bool
    reason: str | None
    gpus: dict[str, int] = field(default_factory=dict)
    gpus_alloc: dict[str, int] = field(default_factory=dict)
    partitions: list[str] = field(default_factory=list)


def parse_sinfo(text: str) -> dict[str, SlurmNode]:
    """`sinfo -N -h -O SINFO_FORMAT`: one line per (node, partition); the reason is the rest of the line."""
    nodes: dict[str, SlurmNode] = {}
    for line in text.splitlines():
        parts = line.split("|", 5)
        if len(parts) < 6 or not parts[0].strip():
            continue
        name, state, partition, gres, used, reason = (p.strip() for p in parts)
        reason = reason.rstrip("|").strip()
        node = nodes.get(name)
        if node is None:
            node = nodes[name] = SlurmNode(name, normalize_state(state), not state.endswith("*"),
                                           None if reason in ("", "none", "(null)") else reason,
                                           parse_gres(gres), parse_gres(used))
        partition = partition.rstrip("*")
        if partition and partition not in node.partitions:
            node.partitions.append(partition)
    return nodes


def partition_gpus(nodes: dict[str, SlurmNode]) -> dict[tuple[str, str, str], int]:
    """(partition, type, alloc|idle|unavailable) -> GPUs; a node in 2 partitions counts in both.
    Unallocated GPUs of a drained, down or otherwise unusable node are `unavailable`, not idle."""
    out: dict[tuple[str, str, str], int] = {}
    for n in nodes.values():
        for p in n.partitions:
            for gtype, total in n.gpus.items():
                for state in ("alloc", "idle", "unavailable"):
                    out.setdefault((p, gtype, state), 0)
                alloc = min(n.gpus_alloc.get(gtype, 0), total)
                out[(p, gtype, "alloc")] += alloc
                out[(p, gtype, "unavailable" if n.state in UNAVAILABLE else "idle")] += total - alloc
    return out


@dataclass
class Job:
    id: str
    state: str
    partition: str
    account: str
    reason: str | None
    gpus: int


def tres_gpus(tres: str) -> int:
    m = re.search(r"(?:^|,)gres/gpu=(\d+)", tres)
    return int(m.group(1)) if m else 0


def parse_squeue(text: str) -> list[Job]:
    """`squeue -h -a -O SQUEUE_FORMAT`; a pending job in several partitions counts under the first."""
    jobs = []
    for line in text.splitlines():
        parts = [p.strip() for p in line.split("|")]
        if len(parts) < 7 or not parts[0]:
            continue
        jid, state, partition, account, reason, _nodes, tres = parts[:7]
        jobs.append(Job(jid, state.lower(), partition.split(",")[0], account or "none",
                        None if reason in ("None", "") else reason, tres_gpus(tres)))
    return jobs


SDIAG_PLAIN = {"Server thread count": "server_threads", "Agent queue size": "agent_queue_size",
               "DBD Agent queue size": "dbd_agent_queue_size", "Jobs submitted": "jobs_submitted",
               "Jobs started": "jobs_started", "Jobs completed": "jobs_completed",
               "Jobs canceled": "jobs_canceled", "Jobs failed": "jobs_failed"}
SDIAG_MAIN = {"Last cycle": ("scheduler_cycle_last_seconds", 1e-6), "Max cycle": ("scheduler_cycle_max_seconds", 1e-6),
              "Mean cycle": ("scheduler_cycle_mean_seconds", 1e-6), "Total cycles": ("scheduler_cycles", 1),
              "Last queue length": ("scheduler_queue_length", 1)}
SDIAG_BACKFILL = {"Last cycle": ("backfill_cycle_last_seconds", 1e-6), "Mean cycle": ("backfill_cycle_mean_seconds", 1e-6),
                  "Total cycles": ("backfill_cycles", 1), "Depth Mean": ("backfill_depth_mean", 1),
                  "Total backfilled jobs (since last slurm start)": ("backfilled_jobs", 1)}


def parse_sdiag(text: str) -> tuple[dict[str, float], dict[str, tuple[int, float]]]:
    """sdiag -> ({metric suffix: value}, {rpc type: (count, total seconds)}); absent lines are absent."""
    values: dict[str, float] = {}
    rpcs: dict[str, tuple[int, float]] = {}
    section = None
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("Main schedule statistics"):
            section = SDIAG_MAIN
        elif stripped.startswith("Backfilling stats"):
            section = SDIAG_BACKFILL
        elif stripped.startswith("Remote Procedure Call statistics by message type"):
            section = "rpc"
        elif stripped.startswith("Remote Procedure Call statistics by user") or stripped.startswith("Pending RPC"):
            section = None
        if section == "rpc":
            m = re.match(r"(\w+)\s+\(\s*\d+\)\s+count:(\d+)\s+ave_time:\d+\s+total_time:(\d+)", stripped)
            if m:
                rpcs[m.group(1)] = (int(m.group(2)), int(m.group(3)) * 1e-6)
            continue
        key, sep, rest = stripped.partition(":")
        m = re.match(r"\s*(-?\d+(?:\.\d+)?)\s*$", rest)
        if not sep or not m:
            continue
        if key in SDIAG_PLAIN and not line.startswith("\t"):
            values[SDIAG_PLAIN[key]] = float(m.group(1))
        elif isinstance(section, dict) and key in section and line.startswith(("\t", " ")):
            name, scale = section[key]
            values[name] = float(m.group(1)) * scale
    return values, rpcs


def ping_up(text: str) -> bool:
    """`scontrol ping`: 'Slurmctld(primary) at ctl is UP' for any controller answering."""
    return bool(re.search(r"\bis UP\b", text))
