"""The site registry's token server on the registry node (render/registry_auth.py says who may push): its own
user (systemd-sysusers), its program, configuration and keys (0440 root:its user; the loader's secret only as a
sha256), the certificate distribution checks tokens against, and the service. Called by deploy/registry.py
before the site registry (re)starts, so the registry never points at a server that is not there."""

from __future__ import annotations

from hashlib import sha256

from corral import secrets, site_ca
from corral.deploy import operations
from corral.deploy.nodestate import Want, register
from corral.engine.conditions import AnyChanged
from corral.engine.shell import cmd
from corral.render import registry_auth as ra
from corral.render.node_programs import node_program

WANT = register(Want(paths=(ra.ETC, ra.CONFIG, ra.CERT, ra.KEY, ra.SIGNING_CERT, ra.SIGNING_KEY, ra.STATE,
                            ra.PROGRAM, ra.UNIT_PATH, ra.SYSUSERS, ra.ROOT_BUNDLE),
                     services=(ra.UNIT,), packages=ra.PACKAGES))


def loader_secret(cluster) -> str:
    """corral's own push credential (control host, 0600 in the state dir)."""
    return secrets.secret_text(cluster.state_dir, ra.LOADER_SECRET, 48)


def token_server(cluster, node, tls: tuple[bytes, bytes]) -> list:
    """Everything the token server needs, then the service running; the ops whose change restarts it (the
    root bundle is distribution's: its change restarts the registry, returned for that)."""
    operations.packages(name="python3-cryptography, munge (the token server's)", names=list(ra.PACKAGES), want=WANT,
                        together=True)
    account = operations.managed_file(name=ra.SYSUSERS, path=ra.SYSUSERS, content=ra.SYSUSERS_TEXT, want=WANT,
                                      disruption=f"restart {ra.UNIT}")
    operations.run_when_changed(name=f"user {ra.USER} made", description="systemd-sysusers", _if=AnyChanged(account),
                                commands=[cmd("systemd-sysusers", ra.SYSUSERS)])
    operations.directory(name=ra.STATE, path=ra.STATE, mode="700", user=ra.USER, group=ra.USER, want=WANT)
    operations.directory(name=ra.ETC, path=ra.ETC, mode="750", user="root", group=ra.USER, want=WANT)
    signer_cert, signer_key = site_ca.token_signer(cluster.state_dir, cluster.name)

    def private(name: str, path: str, content) -> object:
        return operations.managed_file(name=name, path=path, content=content, mode="440", group=ra.USER,
                                       secret=True, want=WANT, disruption=f"restart {ra.UNIT}")
    changes = [account,
               operations.managed_file(name="the token server's program", path=ra.PROGRAM,
                                       content=node_program("registry_auth.py"), want=WANT),
               private("the token server's configuration", ra.CONFIG, ra.config(cluster, sha256(loader_secret(cluster).encode()).hexdigest())),
               operations.managed_file(name="the token server's certificate", path=ra.CERT, content=tls[0],
                                       mode="440", group=ra.USER, want=WANT),
               private("the token server's TLS key", ra.KEY, tls[1]),
               operations.managed_file(name="the token signer's certificate", path=ra.SIGNING_CERT, content=signer_cert,
                                       mode="440", group=ra.USER, want=WANT),
               private("the token signer's key", ra.SIGNING_KEY, signer_key),
               operations.managed_file(name="the token server's unit", path=ra.UNIT_PATH, content=ra.unit(), want=WANT,
                                       disruption=f"restart {ra.UNIT}")]
    bundle = operations.managed_file(name="the certificate the registry checks tokens with", path=ra.ROOT_BUNDLE,
                                     content=signer_cert, want=WANT, disruption="restart the site registry")
    r = cluster.spec.images.registry
    ready = (f"python3 -I -c \"import ssl,urllib.request as u; u.urlopen('https://{r.node}:{r.auth_port}/token?"
             f"service={ra.SERVICE}', timeout=3)\"")
    operations.service(name=f"{ra.UNIT} running", unit=ra.UNIT, want=WANT, wait=ready)
    operations.restart(name=f"{ra.UNIT} restarted (configuration changed)", unit=ra.UNIT, want=WANT, wait=ready,
                       _if=AnyChanged(*changes))
    return [bundle]
