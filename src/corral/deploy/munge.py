"""munge: one key generated once on the control host (state dir, 0600), installed 0400 munge:munge."""

from __future__ import annotations

from pyinfra import host
from pyinfra.api import deploy

from corral.deploy import operations
from corral.deploy.nodestate import Want, register
from corral.render.restart import dropin_path
from corral.secrets import secret_bytes

KEY = "/etc/munge/munge.key"
WANT = register(Want(paths=(KEY, dropin_path("munge")), services=("munge",), packages=("munge",)))


@deploy("munge")
def munge() -> None:
    cluster = host.data.corral_cluster
    key = secret_bytes(cluster.state_dir, "munge.key", 1024)
    operations.packages(name="munge installed", names=["munge"], want=WANT, together=True)
    changed = operations.managed_file(name="munge key", path=KEY, content=key, mode="400", user="munge",
                               group="munge", secret=True, disruption="restart munge", want=WANT)
    operations.restart_policy(name="munge restarted by systemd when it dies", unit="munge", want=WANT, started_next=True)
    operations.service(name="munge running", unit="munge", want=WANT)
    operations.restart(name="munge restarted (key changed)", unit="munge", want=WANT,
                wait="munge -n | unmunge", _if=changed.did_change)
