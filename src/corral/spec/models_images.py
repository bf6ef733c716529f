"""The `images:` section: container images where the GPUs are (docs/components/images.md).

`images.registry` puts Debian's `docker-registry` (distribution) on one node of the cluster, serving
over TLS with a CA corral generates (installed into every node's trust store) or the site's own
certificate: a site registry for the site's images (`site: true`) and one pull-through cache per
upstream registry (`cache:`; distribution proxies one upstream per instance, each on its own port).
`images.podman` puts Debian's podman on login and compute nodes, rootless, pulling through them;
`images.apptainer` Debian's apptainer there, unprivileged (spec/apptainer_source.py: where it comes from).
spec/rules_images.py checks what crosses fields and files.
"""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import AfterValidator, Field
from pydantic_core import PydanticCustomError

from corral.spec.models_base import LOCAL_PATH, Strict
from corral.spec.types import AbsPath, Hostname, UnixUser

# host[:port]: a DNS name or IPv4 address, an optional port (what an image reference starts with)
_REGISTRY_NAME = re.compile(r"(?!-)[a-z0-9-]{1,63}(?<!-)(\.(?!-)[a-z0-9-]{1,63}(?<!-))*(:[0-9]{1,5})?")


def _registry_name(v: str) -> str:
    if not _REGISTRY_NAME.fullmatch(v) or (":" in v and not 0 < int(v.rsplit(":", 1)[1]) < 65536):
        raise PydanticCustomError("corral_value", "not a registry name host[:port] (lowercase DNS name or "
                                                  "address, then an optional port from 1 to 65535): nvcr.io")
    return v


RegistryName = Annotated[str, AfterValidator(_registry_name)]


class RegistryTls(Strict):
    """The registry's certificate: corral's own CA by default, or the site's certificate and key."""

    cert_file: str | None = Field(default=None, pattern=LOCAL_PATH,
                                  description="the site's PEM certificate (chain) for the registry node, on the "
                                              "control host (relative to the spec file); unset: corral's CA "
                                              "signs one (the CA is installed on every node)")
    key_file: str | None = Field(default=None, pattern=LOCAL_PATH,
                                 description="its private key (0600 or 0400, owned by the user running corral); "
                                             "given with cert_file")


class CacheSpec(Strict):
    """A pull-through cache of one upstream registry: nodes pull `upstream`'s images from the cluster."""

    upstream: RegistryName = Field(description="the registry it caches, host[:port]: nvcr.io, docker.io, ghcr.io "
                                               "(docker.io is reached at registry-1.docker.io)")
    port: int = Field(ge=1024, le=65535, description="the cache's own port on the registry node")
    credentials_file: str | None = Field(default=None, pattern=LOCAL_PATH,
                                         description="`user:password` for the upstream on its first line, a file "
                                                     "on the control host (0600 or 0400, owned by the user running "
                                                     "corral); installed only into the cache's configuration "
                                                     "(0600, the registry's user); unset: anonymous pulls")


class RegistrySpec(Strict):
    """Debian's docker-registry on one node, over TLS."""

    node: Hostname = Field(description="the node that runs the registry (a node of the spec)")
    port: int = Field(default=5000, ge=1024, le=65535, description="the site registry's port")
    storage: AbsPath = Field(default="/var/lib/docker-registry",
                             description="where the images are stored on the registry node")
    site: bool = Field(default=True, description="a site registry for the site's own images: every user pulls, "
                                                 "push_group's members push")
    cache: list[CacheSpec] = Field(default_factory=list, description="pull-through caches, one per upstream")
    tls: RegistryTls = Field(default=RegistryTls(), description="the registry's TLS certificate")
    auth_port: int = Field(default=5043, ge=1024, le=65535,
                           description="the site registry's token server (corral's: who may push), on the registry "
                                       "node; every pull and push asks it first")
    push_group: UnixUser | None = Field(default=None,
                                        description="the Unix group (of `groups:` or the directory) whose members "
                                                    "may push to the site registry, as themselves (a MUNGE "
                                                    "credential podman asks corral's helper for); never into a "
                                                    "repository the bundle's images came in. Unset: only corral "
                                                    "pushes (the bundle's images); every user pulls")
    metrics_port: int = Field(default=5051, ge=1024, le=65535,
                              description="the site registry's debug address with /metrics (Prometheus scrapes "
                                          "it; each cache uses the next port up)")


class ApptainerSpec(Strict):
    """Debian's apptainer on login and compute nodes: unprivileged (user namespaces; the setuid helper, Debian's
    apptainer-suid, is never installed), pulling `docker://` images from the site registry (docs/components/apptainer.md)."""

    source: Literal["corral", "mirror"] = Field(
        default="corral", description="corral: Debian unstable's apptainer (neither Debian 13 nor its backports "
                                      "carry one), downloaded by exact version, checked against the suite's signed "
                                      "index and served from corral's repository: the virtual cluster's, and a "
                                      "bundle's (packages.source: bundle on real nodes); Debian 13 nodes only. "
                                      "mirror: the nodes' own apt sources (a site mirror) carry an `apptainer` "
                                      "package, installed as they give it")


class ImagesSpec(Strict):
    """Container images: the cluster's registry and the runtime that pulls through it."""

    registry: RegistrySpec | None = Field(default=None, description="a registry on the cluster network; "
                                                                    "unset: none")
    podman: bool = Field(default=False, description="Debian's podman on login and compute nodes (rootless), "
                                                    "pulling through the registry")
    apptainer: ApptainerSpec | None = Field(default=None, description="Debian's apptainer on login and compute "
                                                                      "nodes (unprivileged), with an Lmod module "
                                                                      "`apptainer` where software: is set; unset: none")
