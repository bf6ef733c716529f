"""corral's judge of slurmctld's restarts, on the controller (stdlib only; run as root by the ExecStartPost of
slurmctld's drop-in `corral-restart-check.conf`, and by `corral health` / `corral validate`).

It reads slurmctld's log (the rotated file first), judges the last restart (ctld_log.py), and keeps:
- STATE (/var/lib/corral/slurmctld-restart.json): the last restart, and the last *unclean* one, kept
  across later clean restarts until a newer unclean one replaces it;
- the node exporter's textfile metrics (corral_slurmctld.prom), which the alert SlurmctldUncleanRestart
  reads: when the last unclean start was, and the job IDs acknowledged and not recovered (a label).
`--wait S`: at slurmctld's start: return at once (the start is never held up) and, in the background, wait up
to S seconds for the new run to have read its state back (a standby backup controller reads it only when it
takes over: it is judged by the next `corral health`).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

from ctld_log import last_restart

LOG = Path("/var/log/slurm/slurmctld.log")
STATE = Path("/var/lib/corral/slurmctld-restart.json")
TEXTFILE = Path("/var/lib/prometheus/node-exporter/corral_slurmctld.prom")
LABEL_IDS = 20   # job IDs named in the metric's label (the rest are counted: a label stays short)


def read_log(log: Path) -> str:
    parts = []
    for p in (log.with_name(log.name + ".1"), log):
        try:
            parts.append(p.read_text(errors="replace"))
        except OSError:
            pass
    return "\n".join(parts)


def nrestarts() -> int | None:
    """systemd's count of its automatic restarts of slurmctld (each follows an unclean end)."""
    try:
        out = subprocess.run(["systemctl", "show", "-p", "NRestarts", "--value", "slurmctld"],
                             capture_output=True, text=True, timeout=10).stdout.strip()
        return int(out)
    except (OSError, ValueError, subprocess.TimeoutExpired):
        return None


def epoch(ts: str | None) -> float:
    """slurmctld's log time (local, ISO 8601) as seconds since the epoch; 0 when absent or odd."""
    try:
        return datetime.fromisoformat(ts).timestamp() if ts else 0.0
    except ValueError:
        return 0.0


def judge(log: Path, wait_s: float) -> dict:
    deadline = time.monotonic() + wait_s
    while True:
        restart = last_restart(read_log(log))
        if restart.recovery_done or time.monotonic() >= deadline:
            break
        time.sleep(0.2)
    return restart.to_json()


def _ids(ids: list[str]) -> str:
    head = ",".join(ids[:LABEL_IDS])
    return head + (f",...(+{len(ids) - LABEL_IDS})" if len(ids) > LABEL_IDS else "")


def metrics(unclean: dict | None) -> str:
    at = epoch(unclean["at"]) if unclean else 0.0
    lost, reran = (unclean or {}).get("lost", []), (unclean or {}).get("reran", [])
    return ("# HELP corral_slurmctld_unclean_restart_timestamp_seconds When slurmctld last started after an "
            "unclean end (0: none seen)\n# TYPE corral_slurmctld_unclean_restart_timestamp_seconds gauge\n"
            f"corral_slurmctld_unclean_restart_timestamp_seconds {at:.0f}\n"
            "# HELP corral_slurmctld_lost_jobs Jobs acknowledged before that end and not recovered after it\n"
            "# TYPE corral_slurmctld_lost_jobs gauge\n"
            f'corral_slurmctld_lost_jobs{{job_ids="{_ids(lost)}"}} {len(lost)}\n'
            "# HELP corral_slurmctld_rerun_jobs Jobs that had ended before that end and were recovered as not done\n"
            "# TYPE corral_slurmctld_rerun_jobs gauge\n"
            f'corral_slurmctld_rerun_jobs{{job_ids="{_ids(reran)}"}} {len(reran)}\n')


def _write(path: Path, text: str, mode: int) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, mode)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.chmod(tmp, mode)
    os.replace(tmp, path)


def record(last: dict, state: Path, textfile: Path) -> dict:
    """The state kept: this judgement, the last unclean restart (this one, or the one kept before)."""
    try:
        before = json.loads(state.read_text())
    except (OSError, ValueError):
        before = {}
    # an unclean restart replaces the one kept (or is the same one judged again, with more of its log read)
    unclean = last if not last["clean"] else before.get("last_unclean")
    age = time.time() - epoch(unclean["at"]) if unclean else None
    out = {"last": last, "last_unclean": unclean, "last_unclean_age_s": None if age is None else round(age),
           "nrestarts": nrestarts()}
    state.parent.mkdir(parents=True, exist_ok=True)
    _write(state, json.dumps(out, indent=1) + "\n", 0o644)
    if textfile.parent.is_dir():
        _write(textfile, metrics(unclean), 0o644)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--log", type=Path, default=LOG)
    ap.add_argument("--state", type=Path, default=STATE)
    ap.add_argument("--textfile", type=Path, default=TEXTFILE)
    ap.add_argument("--wait", type=float, default=0.0)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    if args.wait and os.fork() > 0:
        return 0  # slurmctld's start goes on; the judge waits for its recovery in the background
    out = record(judge(args.log, args.wait), args.state, args.textfile)
    if args.json:
        print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
