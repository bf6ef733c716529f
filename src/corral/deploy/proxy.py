"""proxy (every node, right after base: before anything reaches a mirror): the spec's `proxy:` in
/etc/environment (corral's marked block), in apt's configuration, and in the container engine's unit
(docker or containerd, when nvidia.container_toolkit names one; restarted when its drop-in changed).
The spec dropping `proxy:` takes all of it away again. What each file holds: render/proxy.py."""

from __future__ import annotations

from pyinfra import host
from pyinfra.api import deploy

from corral.deploy import operations
from corral.deploy.nodestate import Want, register
from corral.deploy.users import absent
from corral.render.proxy import APT_CONF, ENVIRONMENT, apt_conf, engine_dropin, environment_block, merge_block

ENGINES = ("docker", "containerd")


def engine_dropin_path(engine: str) -> str:
    return f"/etc/systemd/system/{engine}.service.d/corral-proxy.conf"


WANT = register(Want(paths=(APT_CONF, *(engine_dropin_path(e) for e in ENGINES)), blocks=(ENVIRONMENT,),
                     services=ENGINES))


def engine_of(cluster) -> str | None:
    """The container engine that gets the proxy drop-in (nvidia.container_toolkit.engine), if any."""
    ctk = cluster.spec.nvidia.container_toolkit
    return ctk.engine if ctk is not None and ctk.engine in ENGINES else None


@deploy("proxy")
def proxy() -> None:
    cluster = host.data.corral_cluster
    operations.managed_block(name="/etc/environment: the proxy for shells, jobs and downloads", path=ENVIRONMENT,
                             block=environment_block(cluster), merge=merge_block, want=WANT)
    conf = apt_conf(cluster)
    if conf is not None:
        operations.managed_file(name="apt goes through the proxy", path=APT_CONF, content=conf, want=WANT)
    else:
        absent(name="no apt proxy", paths=[APT_CONF], want=WANT, what="apt proxy configuration")
    engine = engine_of(cluster)
    dropin = engine_dropin(cluster) if engine else None
    for e in ENGINES:
        path = engine_dropin_path(e)
        if e == engine and dropin is not None:
            changed = operations.managed_file(name=f"{e} pulls through the proxy", path=path, content=dropin,
                                              want=WANT, disruption=f"restart {e}")
        else:
            changed = absent(name=f"no proxy drop-in for {e}", paths=[path], want=WANT, what=f"{e} proxy drop-in")
        operations.run_when_changed(name=f"systemd reloaded ({e} proxy drop-in)",  # shell-ok: an op's name
                                    description="daemon-reload",
                                    commands=["systemctl daemon-reload"], _if=changed.did_change)
        operations.restart(name=f"{e} restarted (proxy changed)", unit=e, want=WANT, _if=changed.did_change)
