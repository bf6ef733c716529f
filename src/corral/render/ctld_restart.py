"""slurmctld's restart check (pure): the drop-in that runs corral's judge of the restart after each start of
slurmctld (node/ctld_restart.py, which names the jobs an unclean end lost), and the files it needs.

ExecStartPost with `-`: the judge never fails slurmctld's start, and never holds it up: it returns at once
and waits in the background (at most WAIT_S, under `timeout`) for slurmctld to have logged its recovery,
which takes about a second. With Debian 12's Type=simple unit it runs right after the fork; with
Type=notify (Slurm >= 23.02) after the daemon is ready.
"""

from __future__ import annotations

from corral.paths import LIB

UNIT = "slurmctld"
DROPIN = f"/etc/systemd/system/{UNIT}.service.d/corral-restart-check.conf"
MODULES = ("ctld_restart.py", "ctld_log.py")
WAIT_S = 30
STATE = "/var/lib/corral/slurmctld-restart.json"
# what corral health and validate run on the controller: judge the log now, print the kept state
JUDGE = f"/usr/bin/python3 {LIB}/ctld_restart.py --json"


def dropin_text() -> str:
    return ("# Managed by corral: after each start, judge slurmctld's restart from its log and name the jobs an\n"
            "# unclean end lost (/var/lib/corral/slurmctld-restart.json, the SlurmctldUncleanRestart alert)\n"
            "[Service]\n"
            f"ExecStartPost=-/usr/bin/timeout {WAIT_S + 10} /usr/bin/python3 {LIB}/ctld_restart.py --wait {WAIT_S}\n")
