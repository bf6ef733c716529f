"""Downloads: every URL in the spec is https (unless `allow_http: true`), every package corral downloads
has a sha256 (or an explicit `sha256: skip`, which is warned about on every check and plan)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from pydantic import BaseModel

from corral.errors import Problem
from corral.spec import schedulers
from corral.spec.types import UrlStr

if TYPE_CHECKING:
    from corral.spec.cluster import Cluster

Where = Callable[..., str]
SKIP = "skip"


def _urls(value: object, path: tuple) -> Iterator[tuple[tuple, str]]:
    if isinstance(value, UrlStr):
        yield path, str(value)
    elif isinstance(value, BaseModel):
        for name in type(value).model_fields:
            yield from _urls(getattr(value, name), (*path, name))
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            yield from _urls(item, (*path, i))
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _urls(item, (*path, key))


def check_urls(cluster: Cluster, where: Where) -> list[Problem]:
    if cluster.spec.allow_http:
        return []
    return [Problem(where(path), "a download over http:// can be changed on the way (the node runs what it gets)",
                    url, "use https://, or set allow_http: true at the top of cluster.yaml for a trusted mirror")
            for path, url in _urls(cluster.spec, ()) if url.lower().startswith("http://")]


def downloads(cluster: Cluster) -> list[tuple[tuple, list[str], object]]:
    """(spec path of the sha256 key, packages downloaded, the sha256 value) for each download the
    spec asks for: enroot and pyxis when set, nvidia-mig-parted where a node has a MIG layout on a
    real Slurm cluster (the virtual cluster's emulation brings its own; on Kubernetes the GPU Operator's
    MIG manager applies the layouts), the acceptance tools' sources when
    enabled on a real cluster (the virtual cluster does not build them)."""
    nv, out = cluster.spec.nvidia, []
    acc = cluster.spec.acceptance
    for key, tool, label in (("burn", acc.burn, "gpu-burn source"), ("nccl", acc.nccl, "nccl-tests source")):
        if tool.enabled and cluster.spec.virtual is None:
            out.append((("acceptance", key, "sha256"), [label], tool.sha256))
    if nv.enroot is not None:
        out.append((("nvidia", "enroot", "sha256"), list(nv.enroot.packages), nv.enroot.sha256))
    if nv.pyxis is not None:
        out.append((("nvidia", "pyxis", "sha256"), ["pyxis source"], nv.pyxis.sha256))
    mig = any(n.gpus is not None and n.gpus.mig is not None for n in cluster.nodes)
    if mig and cluster.spec.virtual is None and "mig-parted" in schedulers.of(cluster).carries:  # K8s: the Operator's
        out.append((("nvidia", "mig_parted", "sha256"), list(nv.mig_parted.packages), nv.mig_parted.sha256))
    return out


def _missing(packages: list[str], sums: object) -> list[str]:
    if sums == SKIP:
        return []
    if isinstance(sums, dict):
        return [p for p in packages if p not in sums]
    return [] if sums else packages


def check_checksums(cluster: Cluster, where: Where) -> list[Problem]:
    problems = []
    for path, packages, sums in downloads(cluster):
        missing = _missing(packages, sums)
        if missing:
            key = ".".join(path)
            example = (f"{key}: {{{missing[0]}: <64 hex digits>}}" if isinstance(sums, dict)
                       else f"{key}: <64 hex digits>")
            problems.append(Problem(where(path[:-1]), f"no sha256 for {', '.join(missing)}: corral installs a "
                                    "download as root only after checking it", ", ".join(missing),
                                    f"add {example} (sha256sum of the file), or {key}: skip to install unchecked"))
    return problems


def download_warnings(cluster: Cluster) -> list[str]:
    """One line per download the spec lets through unchecked (`sha256: skip`) or over http."""
    out = [f"{'.'.join(path)}: skip - {', '.join(p)} installed as root without a checksum"
           for path, p, sums in downloads(cluster) if sums == SKIP]
    if cluster.spec.allow_http:
        out += [f"{'.'.join(str(x) for x in path)}: {url} fetched over plain http (allow_http: true)"
                for path, url in _urls(cluster.spec, ()) if url.lower().startswith("http://")]
    return out
