"""The verdict on slurmctld's last unclean restart, for `corral validate` and `corral health`: the judge on
the controller (node/ctld_restart.py) reads slurmctld's log now and says which jobs the restart lost
(acknowledged to their users, not recovered: gone from squeue and sacct, their IDs handed out again)
and which ran twice. Recent (RECENT_S) unclean restarts are a WARN naming them; older ones are history."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable

from corral.checks.result import Check, error_text
from corral.errors import CorralError
from corral.render.ctld_restart import JUDGE, STATE

NAME = "slurmctld restarts"
RECENT_S = 7 * 86400
SHOWN = 20   # job IDs named in the message (all of them are in the state file on the controller)


def _ids(ids: list[str]) -> str:
    return ", ".join(ids[:SHOWN]) + (f" and {len(ids) - SHOWN} more" if len(ids) > SHOWN else "")


def verdict(data: dict, ctl: str) -> Check:
    unclean, age = data.get("last_unclean"), data.get("last_unclean_age_s")
    if not unclean:
        return Check(NAME, "OK", f"no unclean end of slurmctld in its log on {ctl}")
    lost, reran = unclean.get("lost", []), unclean.get("reran", [])
    detail = {ctl: f"unclean restart {unclean['at']}: lost {','.join(lost) or 'none'}; ran again {','.join(reran) or 'none'}"}
    when = f"slurmctld on {ctl} started at {unclean['at']} after an unclean end (kill, crash or power loss)"
    if age is not None and age > RECENT_S:
        return Check(NAME, "OK", f"last unclean restart {unclean['at']}, more than {RECENT_S // 86400} days ago",
                     detail)
    if not lost and not reran:
        return Check(NAME, "OK", f"{when}; every acknowledged job was recovered", detail)
    parts = []
    if lost:
        parts.append(f"{len(lost)} acknowledged job(s) lost (not in squeue or sacct; Slurm hands their IDs out "
                     f"again): {_ids(lost)}")
    if reran:
        parts.append(f"{len(reran)} job(s) that had ended ran again: {_ids(reran)}")
    return Check(NAME, "WARN", f"{when}: " + "; ".join(parts) + f" (all of them: {STATE} on {ctl})", detail)


def restart_check(run: Callable[..., subprocess.CompletedProcess], ctl: str) -> Check:
    """`run(node, command, *, timeout)`: the checks' seam."""
    try:
        proc = run(ctl, JUDGE, timeout=30)
    except CorralError as exc:
        return Check(NAME, "FAIL", error_text(exc))
    try:
        return verdict(json.loads(proc.stdout), ctl)
    except (ValueError, KeyError, TypeError, AttributeError):
        tail = (proc.stderr or proc.stdout or "no output").strip().splitlines()[-1:] or ["no output"]
        return Check(NAME, "FAIL", f"corral's restart judge did not run on {ctl} (rc={proc.returncode}): {tail[0]}; "
                     "is the cluster applied? (`corral apply`)")
