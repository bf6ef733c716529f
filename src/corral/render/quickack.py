"""Immediate ACKs on the accounting node's own address (deploy/accounting.py installs both files).

Why: Slurm 22.05 writes each message on its persistent connections to slurmdbd (slurmctld's, and
every sacctmgr, sacct or sshare run) as two writes, the 4-byte length and then the body, on a socket
without TCP_NODELAY. Nagle's algorithm holds the body until the length is ACKed, and Linux delays
that ACK by 40 ms, so each request and each reply waits ~40 ms: measured on the virtual cluster,
`sacctmgr show cluster` 356 ms -> 4 ms, `sacctmgr -i add account` 534 ms -> 7 ms with the fix.

The fix: the route of the node's own address in the kernel's `local` table gets `quickack 1`, so this
node ACKs at once on connections between itself and that address (slurmctld and the admin's commands
on the node that hosts slurmdbd). Traffic to any other host keeps the kernel's defaults. The kernel
recreates that route without the attribute when the address is configured again (a reboot, a network
restart); slurmdbd's drop-in sets it again at each start, and every `corral apply` checks it.
"""

from __future__ import annotations

from corral.render.restart import UNIT_DIR

SCRIPT = "/usr/local/lib/corral/local-quickack"
DROPIN = f"{UNIT_DIR}/slurmdbd.service.d/corral-local-quickack.conf"


def render_script() -> str:
    """The helper: `local-quickack ADDRESS` adds `quickack 1` to ADDRESS's local route; exit 0 when it
    has it already, and when ADDRESS is not this node's (a warning: there is nothing to tune)."""
    return """#!/bin/sh
# Managed by corral (render/quickack.py): do not edit.
# Immediate ACKs on connections between this node and ADDRESS: its route in the kernel's local table
# gets `quickack 1`. Slurm 22.05 sends each message to slurmdbd as two writes without TCP_NODELAY,
# so without it every request and reply waits for a delayed ACK (40 ms). Traffic to other hosts is
# not affected.
set -eu
addr=${1:?usage: local-quickack ADDRESS}
case "$addr" in *:*) family=-6 ;; *) family=-4 ;; esac
route=$(ip "$family" route show table local exact "$addr" type local)
if [ -z "$route" ]; then
    echo "local-quickack: $addr is not an address of this node: nothing changed" >&2
    exit 0
fi
case " $route " in *" quickack 1 "*) exit 0 ;; esac
# the route's own words (local ADDR dev DEV proto kernel scope host src ADDR), quickack added
# shellcheck disable=SC2086
exec ip "$family" route change table local $route quickack 1
"""


def render_dropin(address: str) -> str:
    """slurmdbd's drop-in: the helper runs before each start; a failure does not stop slurmdbd ('-')."""
    return "\n".join([
        "# Managed by corral (render/quickack.py): immediate ACKs on this node's own address before",
        "# slurmdbd starts (Slurm's messages to slurmdbd otherwise wait 40 ms for each delayed ACK).",
        "# A failure here does not stop slurmdbd: it only makes accounting commands slower.",
        "[Service]", f"ExecStartPre=-{SCRIPT} {address}", ""])


def parse_local_routes(lines: list[str]) -> dict[str, bool]:
    """`ip -o route show table local type local` lines -> {address: has quickack 1}."""
    out: dict[str, bool] = {}
    for line in lines:
        words = line.split()
        if len(words) >= 2 and words[0] == "local":
            out[words[1]] = " quickack 1 " in f" {' '.join(words)} "
    return out
