"""`corral render` for the images components (workflows/render_slurm.py merges these): the cluster's CA on every
node, the registry node's certificate, key (a placeholder), configurations and units (podman's files are its
resources', rendered by workflows/render_slurm.py). Each from the function its deploy calls. Certificates are public but made by apply: render copies them from
the state dir when an apply made them and never makes one (a placeholder names where they will be); a
cache's upstream password is a placeholder."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from corral.render.resources import made_by_apply
from corral.spec.cluster import Node
from corral.workflows.render_slurm import Ctx, Files, restart_dropins, secret

if TYPE_CHECKING:
    from corral.spec.models_images import RegistryTls


def _made(c: Ctx, name: str) -> str | bytes:
    return made_by_apply(c.cluster.state_dir, name)


def _registry(c: Ctx, node: Node) -> Files:
    from corral.deploy.registry import HARDENING
    from corral.render.registry import CERT, KEY, cache_unit, config, instances, site_hardening
    from corral.spec.rules_images import local_file
    tls = _tls(c)
    key = "state-dir/secrets/ca/registry.key"
    if tls.cert_file is not None:
        assert tls.key_file is not None  # spec/rules_images.py: both or neither
        key = f"images.registry.tls.key_file={local_file(c.cluster, tls.key_file)}"
    out: Files = {CERT: _registry_cert(c), KEY: secret(key)}
    for i in instances(c.cluster):
        where = (f"images.registry.cache.credentials_file={local_file(c.cluster, i.credentials_file)}"
                 if i.credentials_file is not None else "")  # i.secret, spelled out for the type checker
        out[i.config] = config(c.cluster, i, (secret(where), secret(where)) if i.secret else None)
        if i.upstream:
            out[f"/etc/systemd/system/{i.unit}.service"] = cache_unit(i)
        else:
            out[HARDENING] = site_hardening(i)
            out.update(restart_dropins(i.unit))
    out.update(_upstream_probe(c))
    out.update(_token_server(c))
    return out


def _token_server(c: Ctx) -> Files:
    """What deploy/registry_auth.py installs: the loader's secret and the keys as placeholders."""
    from corral.render import registry_auth as ra
    from corral.render.node_programs import node_program
    if not ra.enabled(c.cluster):
        return {}
    signer = _made(c, "ca/registry-token-signer.pem")
    tls_cert = _registry_cert(c)
    return {ra.SYSUSERS: ra.SYSUSERS_TEXT, ra.PROGRAM: node_program("registry_auth.py"), ra.UNIT_PATH: ra.unit(),
            ra.CONFIG: ra.config(c.cluster, secret(f"state-dir/secrets/{ra.LOADER_SECRET}")),
            ra.CERT: tls_cert, ra.KEY: secret("images.registry.tls.key"), ra.SIGNING_CERT: signer,
            ra.SIGNING_KEY: secret("state-dir/secrets/ca/registry-token-signer.key"), ra.ROOT_BUNDLE: signer}


def _tls(c: Ctx) -> RegistryTls:
    """images.registry.tls: the registry is set wherever its files are rendered (its component's gate)."""
    registry = c.cluster.spec.images.registry
    assert registry is not None
    return registry.tls


def _registry_cert(c: Ctx) -> str | bytes:
    """The registry node's certificate chain as deploy sends it (the site's, or site_ca's leaf then the CA)."""
    from corral.spec.rules_images import local_file
    tls = _tls(c)
    if tls.cert_file is not None:
        return local_file(c.cluster, tls.cert_file).read_bytes()
    leaf, ca = _made(c, "ca/registry.pem"), _made(c, "ca/ca.pem")
    return leaf + ca if isinstance(leaf, bytes) and isinstance(ca, bytes) else leaf


def _upstream_probe(c: Ctx) -> Files:
    from corral.render import registry_probe as probe
    from corral.render.registry import instances
    insts = instances(c.cluster)
    if not (probe.caches(insts) and c.cluster.spec.monitoring.enabled and c.cluster.with_role("monitoring")):
        return {}
    return {probe.SCRIPT: probe.probe_script(insts), probe.SERVICE: probe.service_unit(insts),
            probe.TIMER: probe.timer_unit()}


RENDERERS: dict[str, Callable[[Ctx, Node], Files]] = {"images registry": _registry}
