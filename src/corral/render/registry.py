"""The cluster's registry, rendered (pure): distribution's configuration for the site registry and for
each pull-through cache (one instance per upstream: distribution proxies one), the cache's systemd unit
(the site registry keeps Debian's docker-registry.service), and where each listens. Every instance
serves TLS on the registry node's cluster address and its /metrics on a debug address beside it.
Used by deploy/registry.py, render/prometheus.py and render/podman.py. Values reach YAML as JSON
strings (a YAML subset), so no spec value can add a key."""

from __future__ import annotations

import json
from dataclasses import dataclass

from corral.spec.cluster import Cluster, Node

CONF_DIR = "/etc/docker/registry"
SITE_CONF = f"{CONF_DIR}/config.yml"  # Debian's unit reads this one
TLS_DIR = f"{CONF_DIR}/tls"
CERT, KEY = f"{TLS_DIR}/registry.crt", f"{TLS_DIR}/registry.key"
CA_PATH = "/usr/local/share/ca-certificates/corral-ca.crt"  # update-ca-certificates reads *.crt here
USER = "docker-registry"  # the Debian package's system user
SITE_UNIT = "docker-registry"
CACHE_POLICY = SITE_UNIT  # render/restart.py: each cache's unit has the site registry's policy in its text
PACKAGE = "docker-registry"
# docker.io's registry API is served at registry-1.docker.io (what docker and podman do for docker.io)
API_HOST = {"docker.io": "registry-1.docker.io"}


@dataclass(frozen=True)
class Instance:
    """One distribution process: the site registry or the cache of `upstream`."""

    unit: str
    config: str
    port: int
    metrics_port: int
    storage: str
    upstream: str | None = None  # a cache's upstream registry, host[:port]
    credentials_file: str | None = None

    @property
    def secret(self) -> bool:
        """Its configuration holds the upstream's password."""
        return self.credentials_file is not None


def instances(cluster: Cluster) -> list[Instance]:
    r = cluster.spec.images.registry
    if r is None:
        return []
    out = [Instance(SITE_UNIT, SITE_CONF, r.port, r.metrics_port, f"{r.storage}/site")] if r.site else []
    for i, c in enumerate(r.cache):
        out.append(Instance(f"corral-registry-cache-{c.port}", f"{CONF_DIR}/cache-{c.port}.yml", c.port,
                            r.metrics_port + 1 + i, f"{r.storage}/cache-{c.port}", c.upstream, c.credentials_file))
    return out


def registry_node(cluster: Cluster) -> Node | None:
    r = cluster.spec.images.registry
    return next((n for n in cluster.nodes if r is not None and n.name == r.node), None)


def endpoint(cluster: Cluster, port: int) -> str:
    """How nodes reach an instance: the registry node's name (its certificate names it; corral's /etc/hosts
    block resolves it) and the port."""
    return f"{cluster.spec.images.registry.node}:{port}"


def _hostport(address: str, port: int) -> str:
    return f"[{address}]:{port}" if ":" in address else f"{address}:{port}"


def config(cluster: Cluster, inst: Instance, credentials: tuple[str, str] | None = None) -> str:
    """distribution's config.yml for `inst` on the registry node; a cache's upstream user and password
    (`credentials`, read from the spec's file by the deploy) go into it: the file is the registry user's
    alone (deploy/registry.py)."""
    node, j = registry_node(cluster), json.dumps
    lines = ["# Managed by corral (images.registry in cluster.yaml) - do not edit", "version: 0.1",
             "log:", "  level: info", "  fields:", f"    service: {j(inst.unit)}",
             "storage:", "  cache:", "    blobdescriptor: inmemory", "  filesystem:",
             f"    rootdirectory: {j(inst.storage)}", "  delete:",
             # the site registry takes no deletes (security review 3, N5: any user could delete any image);
             # a cache's expiry needs them (and distribution's proxy mode refuses a user's push or delete)
             f"    enabled: {'true' if inst.upstream else 'false'}",
             "http:", f"  addr: {j(_hostport(node.address, inst.port))}",
             "  tls:", f"    certificate: {j(CERT)}", f"    key: {j(KEY)}",
             "  headers:", "    X-Content-Type-Options: [nosniff]",
             "  debug:", f"    addr: {j(_hostport(node.address, inst.metrics_port))}",
             "    prometheus:", "      enabled: true", "      path: /metrics",
             "health:", "  storagedriver:", "    enabled: true", "    interval: 10s", "    threshold: 3"]
    if inst.upstream is None:  # the site registry: tokens from corral's server (render/registry_auth.py)
        from corral.render.registry_auth import distribution_auth
        lines += distribution_auth(cluster)
    if inst.upstream is not None:
        host = API_HOST.get(inst.upstream, inst.upstream)
        lines += ["proxy:", f"  remoteurl: {j('https://' + host)}"]
        if credentials is not None:
            lines += [f"  username: {j(credentials[0])}", f"  password: {j(credentials[1])}"]
    return "\n".join(lines) + "\n"


def cache_unit(inst: Instance) -> str:
    """A cache's own service, as Debian's for the site registry: the package's user, nothing else
    writable but its storage; its restart policy in its text (render/restart.py)."""
    from corral.render.restart import service_lines, unit_lines
    start, restart = "\n".join(unit_lines(CACHE_POLICY)), "\n".join(service_lines(CACHE_POLICY))
    return (f"# Managed by corral (images.registry.cache in cluster.yaml)\n[Unit]\n"
            f"Description=pull-through cache of {inst.upstream} (distribution)\n{start}\n"
            f"\n[Service]\nUser={USER}\nGroup={USER}\n{restart}\n"
            f"ExecStart=/usr/bin/docker-registry serve {inst.config}\nNoNewPrivileges=yes\nProtectSystem=strict\n"
            f"ProtectHome=yes\nPrivateTmp=yes\nReadWritePaths={inst.storage}\n\n[Install]\nWantedBy=multi-user.target\n")


def site_hardening(inst: Instance) -> str:
    """A drop-in for Debian's docker-registry.service: what the caches' units say, for the site registry."""
    return ("# Managed by corral (images.registry)\n[Service]\nNoNewPrivileges=yes\nProtectSystem=strict\n"
            f"ProtectHome=yes\nPrivateTmp=yes\nReadWritePaths={inst.storage}\n")


def trust_resources(cluster: Cluster, node: Node) -> list:
    """The cluster's CA in this node's trust store (every node where corral's CA signs a service's certificate:
    podman, curl, enroot and Python trust it), as data; the trust store rebuilt when it changed. The CA is made on
    the control host when applied (never by `corral render`)."""
    from corral import site_ca
    from corral.render import resources as r
    from corral.render.ca_scope import ca_scope
    ca = r.Made(lambda: site_ca.ca_pem(cluster.state_dir, cluster.name, ca_scope(cluster)), "ca/ca.pem")
    return [r.File(CA_PATH, ca, "the cluster's CA trusted"),
            r.OnChange("update-ca-certificates", "the trust store rebuilt", (CA_PATH,),
                       ("update-ca-certificates --fresh >/dev/null",))]
