"""corral-health's Slurm side, pure: read `scontrol show node -o` and decide drain / resume / nothing.

`scontrol show node -o NODE` prints one line of `Key=Value` fields (slurm_sprint_node_table() in
src/api/node_info.c). Values may hold spaces (`OS=Linux 5.14.0-… #1 SMP …`). `State=` is the base
state plus `+FLAG`s (`IDLE+DRAIN`, `MIXED+DRAIN` = draining, `DOWN+NOT_RESPONDING`). `Reason=` comes
after the power fields, as `Reason=<text> [<user>@<time>]`, and only `Comment=`, `Extra=`,
`InstanceId=`, `InstanceType=` and `ReservationName=` may follow it. A missing node prints
`Node NAME not found`.
"""

from __future__ import annotations

import re

PREFIX = "corral:"
# drains of corral's rollouts and removals (workflows/driver_rollout.py, mig_rollout.py, upgrade_rollout.py,
# slurm_upgrade.py, removal.py): the rollout, not the health check, lifts them; a failed power-on
# (node/power.py: the BMC or the boot failed) and GPU processes left after a job (node/jobclean.py) wait for
# an admin. tests/unit/test_health_rollout_reasons.py checks every workflow's drain reason is here.
ROLLOUT_PREFIX = ("corral: driver ", "corral: MIG ", "corral: power:", "corral: package upgrade",
                  "corral: slurm upgrade", "corral: removing", "corral: GPU processes left")
MAX_REASON = 200

_STATE = re.compile(r"(?:^|\s)State=(\S+)")
_NAME = re.compile(r"(?:^|\s)NodeName=(\S+)")
_REASON = re.compile(r"(?:^|\s)Reason=(.*?)(?=\s+(?:Comment|Extra|InstanceId|InstanceType|ReservationName)="
                     r"|\s*$)")
_STAMP = re.compile(r"\s*\[[^\[\]@\s]+@[^\[\]]+\]$")

NONE, DRAIN, RESUME = "none", "drain", "resume"


def parse_scontrol_node(text: str) -> dict | None:
    """One node's `scontrol show node -o` line -> {name, state, base, flags, reason}; None if not found."""
    line = next((ln for ln in text.splitlines() if "NodeName=" in ln), None)
    if line is None:
        return None
    state = (_STATE.search(line) or [None, "UNKNOWN"])[1]
    parts = state.split("+")
    reason = None
    if m := _REASON.search(line):
        reason = _STAMP.sub("", m.group(1)).strip() or None
    return {"name": (_NAME.search(line) or [None, ""])[1], "state": state,
            "base": parts[0].rstrip("*~#$@^!%-"), "flags": set(parts[1:]), "reason": reason}


def corral_reason(message: str) -> str:
    """The drain reason corral writes: `corral: <first failing check's message>`, one line, bounded."""
    text = " ".join(f"{PREFIX} {message}".split())
    return text if len(text) <= MAX_REASON else text[:MAX_REASON - 3] + "..."


def out_of_service(node: dict) -> bool:
    """Drained or draining, down or failed: someone (Slurm, an admin, corral) took it out of service."""
    return "DRAIN" in node["flags"] or "FAIL" in node["flags"] or node["base"] in ("DOWN", "FAIL")


def decide(node: dict, results: list) -> tuple[str, str | None, str]:
    """(current node, check results [(name, status, message)]) -> (action, reason, why).

    fail -> drain with `corral: <message>`, unless already drained with that very reason, or taken out
    of service with another reason (an admin's or Slurm's: theirs stays). pass -> resume only a node
    corral drained (reason starts with `corral:`); never a node held for any other reason.
    """
    failing = [r for r in results if r[1] == "FAIL"]
    held, reason = out_of_service(node), node.get("reason")
    ours = bool(reason and reason.startswith(PREFIX) and not reason.startswith(ROLLOUT_PREFIX))
    if failing:
        want = corral_reason(failing[0][2])
        if held and reason and not ours:
            return NONE, None, f"failing, but {node['state']} with another reason ({reason!r}): left as it is"
        if held and ours and reason == want:
            return NONE, None, f"already {node['state']} with this reason"
        return DRAIN, want, f"{failing[0][0]} failed"
    if held and ours:
        return RESUME, None, f"healthy again; was {node['state']} by corral ({reason!r})"
    if held:
        why = f"with reason {reason!r}" if reason else "without a reason"
        return NONE, None, f"healthy, but {node['state']} {why}: not corral's to resume"
    return NONE, None, "healthy"
