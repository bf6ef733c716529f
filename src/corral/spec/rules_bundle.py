"""`packages.source: bundle`: the bundle file is named, and nothing the spec enables fetches from outside
it. A bundle carries the distribution's packages (bundle/resolve.py), those the spec takes from NVIDIA's
CUDA repository (the driver, DCGM, dcgm-exporter, the CUDA toolkit, NCCL: bundle/vendor.py) and the
spec's pinned downloads (enroot, pyxis, nvidia-mig-parted, gpu-burn, nccl-tests: bundle/downloads.py);
what comes from another apt repository (NVIDIA's container toolkit repository, Grafana's, Ubuntu's
driver packages) is not carried yet: such a spec is refused, naming the key, rather than left to fail on
a node that cannot reach the repository."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from corral.errors import Problem

if TYPE_CHECKING:
    from corral.spec.cluster import Cluster

Where = Callable[..., str]


def outside_sources(cluster: Cluster) -> list[tuple[tuple, str]]:
    """(spec key, what it fetches) for every enabled feature whose packages or files a bundle lacks."""
    spec, nv = cluster.spec, cluster.spec.nvidia
    real = spec.virtual is None  # the virtual cluster skips DCGM (emulated GPUs) and Grafana (render/nvidia.py,
    # deploy/grafana.py: their skip reasons); so does this
    out = []
    if nv.driver is not None and nv.driver.source != "cuda":
        out.append((("nvidia", "driver", "source"), "the NVIDIA driver from the distribution (Ubuntu's packages)"))
    if nv.container_toolkit is not None:
        out.append((("nvidia", "container_toolkit"), "nvidia.container_toolkit's packages (NVIDIA's "
                                                     "libnvidia-container repository)"))
    if real and spec.monitoring.grafana.enabled and cluster.with_role("monitoring"):
        out.append((("monitoring", "grafana", "enabled"), "Grafana from Grafana's repository"))
    return out


def bundle_warnings(cluster: Cluster) -> list[str]:
    p = cluster.spec.packages
    if p.source == "mirror" and p.bundle is not None:
        return [f"packages.bundle ({p.bundle}) is not used: packages.source is mirror (set source: bundle to install "
                "from it alone)"]
    return []


def check_bundle(cluster: Cluster, where: Where) -> list[Problem]:
    p = cluster.spec.packages
    if p.source == "mirror":
        return []
    problems = []
    if cluster.spec.virtual is None and p.serve is None:
        problems.append(Problem(where(("packages", "serve")), "a bundle on a real cluster needs the address the nodes "
                                "fetch it from", "source: bundle", "set packages.serve to ADDRESS:PORT of this host on "
                                "the cluster network (e.g. 10.0.0.1:8079)"))
    if p.bundle is None:
        problems.append(Problem(where(("packages", "bundle")), "packages.source is bundle but no bundle file is named",
                                "source: bundle", "set packages.bundle to the file `corral bundle build` wrote"))
    for path, what in outside_sources(cluster):
        problems.append(Problem(where(path), f"{what} would come from outside the bundle, which does not carry it",
                                "enabled", "turn it off for an air-gapped install (bundles carry the "
                                           "distribution's packages, NVIDIA's CUDA repository's and the pinned "
                                           "downloads, so far)"))
    return problems
