"""`images:` checked across fields and against the control host's files (pure but for reading the
files' metadata): the registry node is a node of the spec, no two of its listeners share a port, the
site's certificate and key come together, and every secret file (the key, the upstreams' credentials)
is a regular file only its owner, the user running corral, can read (0600 or 0400): a credentials
file others can read is refused before anything is changed; apptainer where it has a source
(spec/rules_apptainer.py). spec/rules.py calls check_images."""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from corral.errors import Problem
from corral.spec import schedulers
from corral.spec.rules_apptainer import check_apptainer
from corral.spec.rules_ldap import _file_problem as file_problem

if TYPE_CHECKING:
    from corral.spec.cluster import Cluster

Where = Callable[..., str]
AT = ("images", "registry")


def local_file(cluster: Cluster, value: str) -> Path:
    """A file the spec names on the control host (relative to the spec file's directory)."""
    return (cluster.base_dir / Path(value).expanduser()).resolve()


def secret_file_problem(path: Path) -> str | None:
    """Why `path` may not hold a secret: unreadable, not a regular file, or readable by others than its
    owner, the user running corral."""
    why = file_problem(path)
    if why is not None:
        return why
    st = path.stat()
    if st.st_uid != os.geteuid():
        return f"owned by uid {st.st_uid}, not by the user running corral (uid {os.geteuid()})"
    if stat.S_IMODE(st.st_mode) & 0o077:
        return f"mode {stat.S_IMODE(st.st_mode):04o}: others than its owner may read it"
    return None


def ports(cluster: Cluster) -> dict[str, int]:
    """Every listener of the registry node, what -> port: the site registry, each cache, their metrics
    (the site's `metrics_port`, each cache's the next one up)."""
    r = cluster.spec.images.registry
    out = {"port": r.port, "auth_port": r.auth_port, "metrics_port": r.metrics_port} if r.site else {}
    for i, c in enumerate(r.cache):
        out[f"cache[{i}].port"] = c.port
        out[f"cache[{i}] metrics (metrics_port + {i + 1})"] = r.metrics_port + 1 + i
    return out


def check_images(cluster: Cluster, where: Where) -> list[Problem]:
    images = cluster.spec.images
    runtimes = images.podman or images.apptainer is not None
    if (images.registry is not None or runtimes) and "images" not in schedulers.of(cluster).carries:
        return [Problem(where(("images",)), "images: is deployed with Slurm's components only",
                        cluster.spec.scheduler, "remove images: or use scheduler: slurm")]
    problems: list[Problem] = check_apptainer(cluster, where)
    r = images.registry
    if r is None:  # podman and apptainer alone pull from wherever users say
        return problems
    if r.node not in {n.name for n in cluster.nodes}:
        problems.append(Problem(where(AT + ("node",)), "not a node of the spec", r.node,
                                "name one of the nodes in nodes[].names"))
    if not r.site and not r.cache:
        problems.append(Problem(where(AT + ("site",)), "a registry with neither the site registry nor a cache",
                                False, "set site: true or add a cache: entry"))
    seen: dict[int, str] = {}
    for what, port in ports(cluster).items():
        if port in seen:
            problems.append(Problem(where(AT), f"{what} uses port {port}, as {seen[port]} does", port,
                                    "give every listener of the registry node a port of its own"))
        seen.setdefault(port, what)
    upstreams = [c.upstream for c in r.cache]
    for i, c in enumerate(r.cache):
        if upstreams.index(c.upstream) != i:
            problems.append(Problem(where(AT + ("cache", i, "upstream")), "cached twice", c.upstream,
                                    "list each upstream once"))
        if c.credentials_file is not None:
            problems += _secret(cluster, where, AT + ("cache", i, "credentials_file"), c.credentials_file,
                                f"credentials file of {c.upstream}")
    problems += _push_group(cluster, where)
    tls = r.tls
    if (tls.cert_file is None) != (tls.key_file is None):
        have = "cert_file" if tls.cert_file is not None else "key_file"
        problems.append(Problem(where(AT + ("tls", have)), "the site's certificate and key come together",
                                getattr(tls, have), "give both cert_file and key_file, or neither (corral's CA)"))
    elif tls.cert_file is not None:
        why = file_problem(local_file(cluster, tls.cert_file))
        if why is not None:
            problems.append(Problem(where(AT + ("tls", "cert_file")), f"registry certificate: {why}", tls.cert_file,
                                    "put the PEM certificate there or correct the path"))
        problems += _secret(cluster, where, AT + ("tls", "key_file"), tls.key_file, "registry key")
    return problems


def _push_group(cluster: Cluster, where: Where) -> list[Problem]:
    """push_group: a group that exists (the spec's, or the directory's where there is one), never a privileged
    one, and a site registry to push to."""
    from corral.spec.models_users import PRIVILEGED_GROUPS
    r, at = cluster.spec.images.registry, AT + ("push_group",)
    g = r.push_group
    if g is None:
        return []
    if not r.site:
        return [Problem(where(at), "no site registry to push to (site: false)", g, "set site: true or remove push_group")]
    if g in PRIVILEGED_GROUPS:
        return [Problem(where(at), "a group whose members are, or can become, root", g,
                        "name a group of its own for the image makers")]
    known = {x.name for x in cluster.spec.groups} | {u.group or u.name for u in cluster.spec.users}
    if g not in known and cluster.spec.identity.ldap is None:
        return [Problem(where(at), "not a group of the spec (groups:, or a user's personal group), and there is no "
                                   "directory to find it in", g, "add it to groups: and to its members' groups")]
    return []


def _secret(cluster: Cluster, where: Where, at: tuple, value: str, what: str) -> list[Problem]:
    path = local_file(cluster, value)
    why = secret_file_problem(path)
    if why is None:
        return []
    return [Problem(where(at), f"{what} {path}: {why}", value,
                    f"chmod 600 {path} (owned by the user running corral), or correct the path")]
