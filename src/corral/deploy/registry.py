"""images.registry: Debian's docker-registry (distribution) on the registry node (docs/components/images.md); corral's
CA in every node's trust store is the `ca trust` component, declared as data (render/registry.py trust_resources).

The node's certificate is made on the control host (site_ca: signed by the cluster's CA, state dir 0600) unless the
spec gives the site's; the key is installed 0440 root:docker-registry. The site registry runs
under Debian's unit, the caches under corral's (render/registry.py), all as the package's
docker-registry user; a cache's upstream password lives only in its configuration file (0440
root:docker-registry, masked in every diff): it is uploaded as file content, never a command's word."""

from __future__ import annotations

from pyinfra import host
from pyinfra.api import deploy, operation

from corral.components import gates
from corral.errors import CorralError
from corral.deploy import operations
from corral.deploy.nodestate import Want, register, register_for_run, snapshot
from corral.engine.notes import annotate
from corral.engine.shell import cmd
from corral.engine.conditions import AnyChanged
from corral.render.registry import (CA_PATH, CERT, KEY, PACKAGE, SITE_UNIT, TLS_DIR, USER, cache_unit,
                                    config, instances, registry_node, site_hardening)
from corral.render import registry_probe as probe
from corral.render.restart import dropin_path
from corral.render.ca_scope import ca_scope
from corral import site_ca
from corral.secrets import admin_secret_text
from corral.spec.rules_images import local_file

HARDENING = f"/etc/systemd/system/{SITE_UNIT}.service.d/corral-hardening.conf"
WANT = register(Want(paths=(CA_PATH, CERT, KEY, TLS_DIR, HARDENING, dropin_path(SITE_UNIT)),
                     services=(SITE_UNIT, f"{probe.NAME}.timer"), packages=(PACKAGE, "curl")))


def tls_pair(cluster) -> tuple[bytes, bytes]:
    """The registry node's (certificate, key): the site's files, or signed by corral's CA."""
    tls = cluster.spec.images.registry.tls
    if tls.cert_file is not None:
        return local_file(cluster, tls.cert_file).read_bytes(), local_file(cluster, tls.key_file).read_bytes()
    node = registry_node(cluster)
    made = site_ca.server_cert(cluster.state_dir, cluster.name, "registry", [node.name, node.address],
                               ca_scope(cluster))
    return made.cert.encode(), made.key.encode()


def upstream_credentials(cluster, path: str) -> tuple[str, str]:
    """`user:password` from a cache's credentials file (checked 0600/0400 by spec/rules_images.py)."""
    text = admin_secret_text(local_file(cluster, path), "upstream registry credentials")
    user, sep, password = text.partition(":")
    if not sep or not user or not password:
        raise CorralError("the upstream registry credentials file does not hold user:password on its first line",
                          where=str(local_file(cluster, path)), fix="write user:password (e.g. $oauthtoken:KEY)")
    return user, password


@deploy("images registry")
def registry() -> None:
    node, cluster = host.data.corral_node, host.data.corral_cluster
    if not gates.registry(cluster, node):  # the declaration's gate (components/slurm.py)
        return
    insts, storage = instances(cluster), cluster.spec.images.registry.storage
    want = register_for_run(Want(paths=(storage, *(i.config for i in insts), *(i.storage for i in insts),
                                        *(f"/etc/systemd/system/{i.unit}.service" for i in insts if i.upstream),
                                        *(dropin_path(i.unit) for i in insts if not i.upstream),
                                        probe.SCRIPT, probe.SERVICE, probe.TIMER),
                                 services=(*(i.unit for i in insts), f"{probe.NAME}.timer")))
    operations.packages(name="docker-registry (distribution), curl", names=[PACKAGE, "curl"], want=WANT, together=True)
    operations.directory(name=f"registry storage {storage}", path=storage, want=want, mode="750", user=USER, group=USER)
    for i in insts:
        operations.directory(name=f"{i.unit} storage", path=i.storage, want=want, mode="750", user=USER, group=USER)
    operations.directory(name=TLS_DIR, path=TLS_DIR, want=WANT, mode="750", user="root", group=USER)
    cert, key = tls_pair(cluster)
    # the site registry's token server first: the registry's configuration points at it
    from corral.deploy.registry_auth import token_server
    auth = token_server(cluster, node, (cert, key)) if any(not i.upstream for i in insts) else []
    tls = [operations.managed_file(name="registry certificate", path=CERT, content=cert, want=WANT,
                                   disruption="restart the registry"),
           operations.managed_file(name="registry key", path=KEY, content=key, want=WANT, mode="440", group=USER,
                                   secret=True, disruption="restart the registry")]
    for i in insts:
        creds = upstream_credentials(cluster, i.credentials_file) if i.secret else None
        changed = [*tls, *(auth if not i.upstream else []), operations.managed_file(
            name=f"{i.unit} configuration", path=i.config, content=config(cluster, i, creds), want=want,
            mode="440", group=USER, secret=i.secret, disruption=f"restart {i.unit}")]
        unit = (cache_unit(i) if i.upstream else site_hardening(i))
        path = f"/etc/systemd/system/{i.unit}.service" if i.upstream else HARDENING
        changed.append(operations.unit_dropin(name=f"{i.unit} unit", unit=i.unit, path=path, content=unit,
                                              want=want, started_next=True))
        if not i.upstream:  # a cache's unit has its policy in its text
            operations.restart_policy(name=f"{i.unit} restarted by systemd when it dies", unit=i.unit, want=want,
                                      started_next=True)
        # the site registry answers 401 without a token (render/registry_auth.py), a cache 200
        wait = (f"test \"$(curl -sS -o /dev/null -w '%{{http_code}}' https://{registry_node(cluster).name}:{i.port}/v2/)\""
                f" = {401 if not i.upstream else 200}")
        operations.service(name=f"{i.unit} running", unit=i.unit, want=want, wait=wait)
        operations.restart(name=f"{i.unit} restarted (configuration changed)", unit=i.unit, want=want, wait=wait,
                           _if=AnyChanged(*changed))
    if probe.caches(insts) and cluster.spec.monitoring.enabled and cluster.with_role("monitoring"):
        upstream_probe(insts, want)
    else:  # no cache, or no monitoring: a probe left from before would keep asking (and its alert fire)
        probe_removed(name=f"{probe.NAME} removed (no cache to probe)", want=want)


@operation()
def probe_removed(want: Want):
    """The upstreams' probe gone from a node that no longer needs it: its timer stopped and disabled, its
    script, units and metrics file removed (RegistryUpstreamUnreachable reads that file)."""
    files = snapshot(want).files
    there = [f for f in (probe.SCRIPT, probe.SERVICE, probe.TIMER) if files.get(f) is not None]
    if not there:
        host.noop(f"no {probe.NAME} here")
        return
    annotate(disruption=f"stop {probe.NAME}.timer", diff="".join(f"- {f}\n" for f in (*there, probe.METRICS)))
    if probe.TIMER in there:
        yield cmd("timeout", "60", "systemctl", "disable", "--now", "--quiet", f"{probe.NAME}.timer")
    yield cmd("rm", "-f", "--", probe.SCRIPT, probe.SERVICE, probe.TIMER, probe.METRICS)
    yield cmd("timeout", "60", "systemctl", "daemon-reload")


def upstream_probe(insts, want: Want) -> None:
    """The timer that asks each cache's upstream whether it answers (render/registry_probe.py), for the alert
    RegistryUpstreamUnreachable: the script, its oneshot service, the timer enabled and started."""
    operations.managed_file(name=probe.SCRIPT, path=probe.SCRIPT, content=probe.probe_script(insts), mode="755",
                            want=want)
    units = [operations.managed_file(name=probe.SERVICE, path=probe.SERVICE, content=probe.service_unit(insts),
                                     want=want, disruption="none (systemd reloaded)")]
    units.append(operations.managed_file(name=probe.TIMER, path=probe.TIMER, content=probe.timer_unit(), want=want,
                                         disruption="none (systemd reloaded)"))
    operations.service(name=f"{probe.NAME}.timer running", unit=f"{probe.NAME}.timer", want=want)
    operations.restart(name=f"{probe.NAME}.timer restarted (a unit changed: systemd reloaded)",
                       unit=f"{probe.NAME}.timer", want=want, _if=AnyChanged(*units))
