"""A failed slurmctld restart (or `scontrol reconfigure`) after new Slurm configuration files rolls back.

Before the files are installed, `backup_script` copies each one to `<path>.corral-prev` (when it
exists). After them, `apply_or_rollback_script` restarts slurmctld and waits until it answers (or only
reconfigures it; a backup controller's is only restarted: see deploy/slurm.py); when that fails it prints the daemon's log lines, puts the previous files back
(removing those that did not exist), restarts slurmctld with them (its start limit cleared first: systemd
may have restarted the failing slurmctld until the limit, render/restart.py) and fails with a line saying so.
On success the .corral-prev copies go.
"""

from __future__ import annotations

from collections.abc import Sequence

from corral.engine.shell import q

PREV = ".corral-prev"


def backup_script(paths: Sequence[str]) -> str:
    """Copy each existing file to <path>.corral-prev (mode and owner kept); a stale copy goes first."""
    lines = ["set -e"]  # every interpolating line goes in by append: tests/unit/test_shell_quoting.py scans those
    for p in paths:
        lines.append(f"rm -f {q(p + PREV)}; if [ -e {q(p)} ]; then cp -p {q(p)} {q(p + PREV)}; fi")
    return "\n".join(lines) + "\n"


def apply_or_rollback_script(paths: Sequence[str], restart: bool, ready: str, logs: str,
                             reconfigure: bool = True) -> str:
    """Restart slurmctld and wait with `ready` (ops.readiness: prints the log lines itself when it
    fails), then `scontrol reconfigure` (unless `reconfigure` is False); or only reconfigure. A failure restores the .corral-prev
    files (backup_script) and restarts slurmctld with them; the script then exits 1. `ready` and
    `logs` are shell corral wrote (deploy/slurm.py), never a spec value."""
    names = ", ".join(paths)
    restored = f"previous configuration restored ({names}) and slurmctld restarted with it"
    not_back = f"previous configuration restored ({names}); slurmctld did not come back with it either"
    lines: list[str] = []  # every line goes in by append/extend: tests/unit/test_shell_quoting.py scans those
    lines.extend(["set -u",
                  f"logs() {{ echo \"$1; last log lines:\" >&2; ( {logs} ) >&2; }}",  # shell-ok: logs is corral's
                  "ok=0"])
    if not (restart or reconfigure):
        raise ValueError("apply_or_rollback_script: neither a restart nor a reconfigure")
    then = ("if scontrol reconfigure; then ok=1; else logs 'scontrol reconfigure failed'; fi" if reconfigure
            else "ok=1")
    if restart:
        lines.extend(["if systemctl restart slurmctld; then",
                      f"  if ( {ready} ); then {then}; fi",  # shell-ok: ready: corral's; then: above
                      "else logs 'systemctl restart slurmctld failed'; fi"])
    else:
        lines.append(then)
    lines.append(f"if [ \"$ok\" = 1 ]; then rm -f {' '.join(q(p + PREV) for p in paths)}; exit 0; fi")
    for p in paths:  # no copy: the file did not exist before this run
        lines.append(f"if [ -e {q(p + PREV)} ]; then mv -f {q(p + PREV)} {q(p)}; else rm -f {q(p)}; fi")
    # a slurmctld that failed with the new files was restarted by systemd (render/restart.py) until its
    # start limit: clear the count, or this start would be refused
    lines.append("systemctl reset-failed slurmctld 2>/dev/null || true")
    lines.extend([f"if systemctl restart slurmctld && ( {ready} ); then",  # shell-ok: ready is corral's
                  f"  echo {q(restored)} >&2",
                  f"else echo {q(not_back)} >&2; fi",
                  "exit 1"])
    return "\n".join(lines) + "\n"
