"""Pure parsers of Slurm command output used by validate (and tested on captured output)."""

from __future__ import annotations

import re

PING = re.compile(r"^Slurmctld\((primary|backup\d*)\) at (\S+) is (UP|DOWN)\s*$", re.MULTILINE)
UNAVAILABLE = ("DOWN", "DRAIN", "FAIL", "UNKNOWN", "NOT_RESPONDING", "FUTURE", "POWERED_DOWN", "MAINT")


def parse_show_node(text: str) -> dict[str, dict[str, str]]:
    """`scontrol show node -o`: one line per node of Key=Value pairs (Reason may contain spaces)."""
    nodes = {}
    for line in text.splitlines():
        if not line.startswith("NodeName="):
            continue
        fields: dict[str, str] = {}
        reason = re.search(r" Reason=(.*)$", line)
        if reason:
            fields["Reason"] = reason.group(1).strip()
            line = line[:reason.start()]
        for token in line.split():
            key, _, value = token.partition("=")
            fields[key] = value
        nodes[fields["NodeName"]] = fields
    return nodes


def available(fields: dict[str, str]) -> bool:
    state = fields.get("State", "UNKNOWN").upper()
    return not any(flag in state for flag in UNAVAILABLE) and not state.endswith("*")


def gres_counts(gres: str) -> dict[str, int]:
    """`gpu:h100:4(S:0-1),gpu:a100:2` -> {"h100": 4, "a100": 2} (untyped: key "")."""
    counts: dict[str, int] = {}
    for item in filter(None, (g.strip() for g in re.split(r",(?![^(]*\))", gres or ""))):
        parts = re.sub(r"\(.*\)", "", item).split(":")
        if parts[0] != "gpu" or len(parts) < 2:
            continue
        typ, num = (parts[1], parts[2]) if len(parts) >= 3 else ("", parts[1])
        if num.isdigit():
            counts[typ] = counts.get(typ, 0) + int(num)
    return counts


def parse_ping(text: str) -> list[tuple[str, str, bool]]:
    """`scontrol ping`: one line per controller, in failover order -> [(role, host, up)]:
    'Slurmctld(primary) at ctl is UP', 'Slurmctld(backup) at ctl2 is DOWN' ("backupN" with more than one
    backup). Other lines (root's "RESTORE SLURMCTLD DAEMON TO SERVICE" banner) are skipped."""
    return [(m.group(1), m.group(2), m.group(3) == "UP") for m in PING.finditer(text)]


def ping_up(text: str) -> bool:
    """Some controller answers `scontrol ping` (the primary, or a backup that took over)."""
    return any(up for _, _, up in parse_ping(text))


def slurm_version(text: str) -> str | None:
    m = re.search(r"slurm(?:-wlm)? (\d+\.\d+\.\d+)", text)
    return m.group(1) if m else None
