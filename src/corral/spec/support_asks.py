"""What a spec asks of the support matrix: the (release, component, source) combinations per node group.

The gates mirror the deploys': a component counts on a group only where its deploy would install it there
(DCGM, dcgm-exporter, the container toolkit, Grafana and NCCL are skipped on the virtual cluster, so a
virtual spec asks nothing of them). The source is where the packages come from: the bundle when
`packages.source: bundle`; else the vendor's repository or release at its default URL, a site mirror where
the spec names another (repo_url, url), or the release's own archive. On the virtual cluster the nodes' apt
sources are corral's repository, which stands in for a site mirror: what it serves beyond the release's
archive (NVIDIA's packages as TEST stand-ins, Debian unstable's Slurm and apptainer) counts as "mirror".
Pure: no I/O. tests/unit/test_support_matrix.py holds every accepted spec's asks to a cell.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from corral.spec.containers import EnrootSpec, PyxisSpec
from corral.spec.models_monitoring import GrafanaSpec
from corral.spec.models_nvidia import CUDA_REPO, ContainerToolkitSpec
from corral.spec.releases import RELEASES, slurm_major
from corral.spec.slurm_releases import parts

if TYPE_CHECKING:
    from corral.spec.cluster import Cluster, Node


@dataclass(frozen=True)
class Ask:
    group: int            # index in spec.nodes
    release: str
    component: str        # a key of spec/support.COMPONENTS
    source: str           # a key of spec/support.SOURCES
    at: tuple             # the spec key that asks for it (where a refusal points)
    defaulted: bool = False  # on by the model's default, not by the spec's word (DCGM, dcgm-exporter)


def _default(model, field: str) -> str:
    return str(model.model_fields[field].default).rstrip("/")


def _vendor(cluster: Cluster, url: object, default: str) -> str:
    """bundle | mirror | vendor for a package of a vendor's apt repository at `url`."""
    if cluster.spec.packages.source == "bundle":
        return "bundle"
    if cluster.spec.virtual is not None:  # vendor repositories are never set up there: corral's repository
        return "mirror"
    return "vendor" if str(url).rstrip("/") == default else "mirror"


def _download(cluster: Cluster, url: str, default: str) -> str:
    """A pinned download (enroot, pyxis): fetched from its URL on the virtual cluster too."""
    if cluster.spec.packages.source == "bundle":
        return "bundle"
    return "vendor" if url == default else "mirror"


def _cuda_url(cluster: Cluster) -> object:
    nv = cluster.spec.nvidia
    return nv.driver.repo_url if nv.driver else cluster.spec.monitoring.dcgm_exporter.repo_url


def _per_node(cluster: Cluster, node: Node, monitored: bool) -> list[tuple[str, str, tuple, bool]]:
    """(component, source, spec key, defaulted) that `node` asks for; `monitored`: a node has the monitoring role."""
    spec, nv, m = cluster.spec, cluster.spec.nvidia, cluster.spec.monitoring
    real, gpu = spec.virtual is None, node.gpu_count > 0 and "compute" in node.roles
    jobs = "compute" in node.roles or "login" in node.roles
    out = []
    d = nv.driver
    if d is not None and gpu:
        if d.source == "distribution":  # a package the spec names: the nodes' own apt sources carry it
            src = ("bundle" if spec.packages.source == "bundle" else "mirror") if d.package else "distribution"
        else:
            src = _vendor(cluster, d.repo_url, CUDA_REPO)
        out.append(("driver", src, ("nvidia", "driver", "source" if src == "distribution" else "repo_url"), False))
        if d.source == "cuda" and d.package is None:  # with the driver where NVSwitches are (plan time)
            out.append(("fabric-manager", src, ("nvidia", "driver"), False))
    cuda = _vendor(cluster, _cuda_url(cluster), CUDA_REPO)
    if nv.cuda_toolkit is not None and jobs:
        archive = nv.cuda_toolkit.source == "distribution"
        out.append(("cuda-toolkit", "distribution" if archive else cuda,
                    ("nvidia", "cuda_toolkit", "source") if archive else ("nvidia", "cuda_toolkit"), False))
    if real and gpu and spec.acceptance.nccl.enabled:
        out.append(("nccl", cuda, ("acceptance", "nccl", "enabled"), False))
    if real and gpu and nv.dcgm.enabled:
        out.append(("dcgm", cuda, ("nvidia", "dcgm", "enabled"), "enabled" not in nv.dcgm.model_fields_set))
    x = m.dcgm_exporter
    if real and gpu and m.enabled and x.enabled and monitored:
        out.append(("dcgm-exporter", cuda, ("monitoring", "dcgm_exporter", "enabled"), "enabled" not in x.model_fields_set))
    c = nv.container_toolkit
    if real and gpu and c is not None:
        out.append(("container-toolkit", _vendor(cluster, c.repo_url, _default(ContainerToolkitSpec, "repo_url")),
                    ("nvidia", "container_toolkit"), False))
    if nv.enroot is not None and "compute" in node.roles:
        out.append(("enroot", _download(cluster, nv.enroot.url, _default(EnrootSpec, "url")), ("nvidia", "enroot"), False))
    if nv.pyxis is not None and spec.scheduler == "slurm":
        out.append(("pyxis", _download(cluster, nv.pyxis.url, _default(PyxisSpec, "url")), ("nvidia", "pyxis"), False))
    a = spec.images.apptainer
    if a is not None and jobs:
        src = "mirror" if a.source == "mirror" or not real else "distribution"
        out.append(("apptainer", "bundle" if spec.packages.source == "bundle" else src, ("images", "apptainer"), False))
    if spec.scheduler == "slurm":
        out.append(_slurm(cluster, node))
    if m.enabled and monitored:
        out.append(("prometheus", "bundle" if spec.packages.source == "bundle" else "distribution", ("monitoring",), False))
    g = m.grafana
    if real and m.enabled and g.enabled and "monitoring" in node.roles:
        out.append(("grafana", _vendor(cluster, g.repo_url, _default(GrafanaSpec, "repo_url")),
                    ("monitoring", "grafana"), False))
    return out


def _slurm(cluster: Cluster, node: Node) -> tuple[str, str, tuple, bool]:
    wanted, rel = cluster.spec.slurm.version, RELEASES.get(node.os)
    newer = bool(wanted and rel and parts(slurm_major(wanted)) > parts(rel.slurm))
    bundle = cluster.spec.packages.source == "bundle"
    source = "bundle" if bundle else ("mirror" if newer else "distribution")
    return ("slurm-newer" if newer else "slurm", source, ("slurm", "version") if newer else ("slurm",), False)


def asks(cluster: Cluster) -> list[Ask]:
    """Every (group, release, component, source) the spec asks for, once each, in group order."""
    seen: dict[tuple, Ask] = {}
    monitored = bool(cluster.with_role("monitoring"))  # once: asked per node it made a large import quadratic
    for node in cluster.nodes:
        for component, source, at, defaulted in _per_node(cluster, node, monitored):
            key = (node.group, component, source)
            seen.setdefault(key, Ask(node.group, node.os, component, source, at, defaulted))
    return list(seen.values())
