"""munge, declared as data (components/slurm.py): one key generated once on the control host (state dir, 0600),
installed 0400 munge:munge on every node; munge restarted by systemd when it dies, and by apply when its key
changed (then proven with a credential it decodes)."""

from __future__ import annotations

from corral import secrets
from corral.render import resources as r
from corral.render.restart import POLICIES

KEY = "/etc/munge/munge.key"
SECRET = "munge.key"  # in the state dir's secrets/
KEY_BYTES = 1024


def resources(cluster, node) -> list:
    key = r.Made(lambda: secrets.secret_bytes(cluster.state_dir, SECRET, KEY_BYTES), SECRET)
    return [
        r.Packages(("munge",), "munge installed", "every node (Slurm's authentication)"),
        r.File(KEY, key, "munge key", mode="400", user="munge", group="munge", secret=True,
               disruption="restart munge"),
        r.Service("munge", "munge running", restart="munge restarted (key changed)", restart_on=(KEY,),
                  policy=POLICIES["munge"], restart_wait="munge -n | unmunge",
                  runs=r.Daemon("munge.service", "munge", "Slurm's authentication (a socket on this node only)")),
    ]
