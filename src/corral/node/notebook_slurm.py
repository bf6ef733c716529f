"""How the notebook hub acts for a user, and what a user's server may tell it. The hub runs as a user of its own,
not root. Pure Python, standard library only. Installed as /etc/corral/jupyterhub/corral_notebook_slurm.py beside
jupyterhub_config.py, which imports it; corral's renderer and tests import it too.

- **Commands, never a shell line.** batchspawner joins each Slurm command into one string and runs it through a
  shell. corral's spawner names a verb instead (its batch_*_cmd settings: `submit`, `query JOB`, `cancel JOB`),
  and argv() turns that verb into an argument vector: sudo, as the user, one of Slurm's commands by absolute
  path (settings.json's `slurm` table, rendered by render/jupyterhub.py). The sudoers rule, rendered from the
  same table, allows exactly these commands, and only as the spec's users and its directory login groups: never
  root or a system account.
- **A server tells the hub its port, nothing else.** batchspawner-singleuser, in the user's job, POSTs the port
  its server listens on, with the server's own token. The token is in the job's environment, so the body is the
  user's to write: port() takes `{"port": N}` and refuses anything else. batchspawner's own handler would set
  any attribute of the spawner that the body names.
"""

from __future__ import annotations

import re

JOB = "{job}"  # where a verb's argv takes the job id
JOB_ID = re.compile(r"[0-9]{1,12}")
PORTS = (1024, 65535)


def argv(line: str, user: str, s: dict) -> list[str]:
    """The argv for batchspawner's command `line` (a verb, and a job id where the verb takes one) run as `user`,
    from settings.json `s`. ValueError for anything else: an unknown verb, a job id that is not a number, a user
    name outside the hub's pattern."""
    words = line.split()
    if not words or words[0] not in s["slurm"]:
        raise ValueError(f"not a command the hub runs: {line[:60]!r}")
    if not re.fullmatch(s["user_pattern"], user):
        raise ValueError(f"not a user name the hub acts for: {user[:40]!r}")
    template, rest = s["slurm"][words[0]], words[1:]
    if JOB in template:
        if len(rest) != 1 or not JOB_ID.fullmatch(rest[0]):
            raise ValueError(f"not a Slurm job id: {' '.join(rest)[:40]!r}")
    elif rest:
        raise ValueError(f"{words[0]} takes no arguments, got {' '.join(rest)[:40]!r}")
    return [s["sudo"], "-n", "-u", user, "--", *(rest[0] if w == JOB else w for w in template)]


def port(body: object) -> int:
    """The port in batchspawner-singleuser's POST, the only thing a server may set; ValueError otherwise."""
    if not isinstance(body, dict) or set(body) != {"port"}:
        raise ValueError('only {"port": N} may be sent here')
    value = body["port"]
    if type(value) is not int or not PORTS[0] <= value <= PORTS[1]:
        raise ValueError(f"port: a whole number from {PORTS[0]} to {PORTS[1]}, not {str(value)[:20]!r}")
    return value
