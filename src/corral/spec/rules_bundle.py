"""`packages.source: bundle`: the bundle file is named, and nothing the spec enables fetches from outside
it. A bundle carries the distribution's packages (bundle/resolve.py), those the spec takes from the
vendors' repositories (NVIDIA's CUDA repository, its container toolkit repository, Grafana's:
bundle/vendor.py) and the spec's pinned downloads (enroot, pyxis, nvidia-mig-parted, gpu-burn,
nccl-tests: bundle/downloads.py). Ubuntu's own driver packages (`nvidia.driver.source: distribution`)
are not carried: such a spec is refused, naming the key, rather than left to fail on a node that cannot
reach the repository. A bundle is resolved for one Debian release, the nodes' (bundle/build.py): Debian 12
or Debian 13 (with Slurm 26.05 when slurm.version asks, virtual/slurm_more.py); a node group of another
release, or of a second release in the same spec, is refused the same way. The vendors' repositories are
carried for Debian 12 bundles only (render/vendor_repos.py resolves their debian12 paths: bundle/build.py
refuses a Debian 13 bundle that would need one, and coverage names what such nodes would lack)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from corral.errors import Problem

if TYPE_CHECKING:
    from corral.spec.cluster import Cluster

Where = Callable[..., str]
BUNDLE_RELEASES = ("debian-12", "debian-13")  # the releases bundle/build.py resolves for (a node image, apt)
VENDOR_RELEASE = "debian-12"  # the vendors' repositories are carried for it alone


def release_of_distribution(said: object):
    """The bundle release whose manifest `distribution` (bundle/build.py: "debian trixie") is `said`; None for
    anything else. A manifest is read before it is verified in places: only ever matched, never used raw."""
    from corral.spec.releases import RELEASES
    return next((RELEASES[n] for n in BUNDLE_RELEASES if said == f"{RELEASES[n].distro} {RELEASES[n].suite}"), None)


def bundle_os(cluster: Cluster) -> str:
    """The release a bundle for this spec is resolved for: its first node group's."""
    return cluster.spec.nodes[0].os


def unbundled(cluster: Cluster) -> list:
    """(index, group) of the node groups on a release bundles are not resolved for, or on another release than
    the first group's (a bundle serves one release)."""
    first = bundle_os(cluster)
    return [(i, g) for i, g in enumerate(cluster.spec.nodes) if g.os not in BUNDLE_RELEASES or g.os != first]


def why_unbundled(cluster: Cluster, os_name: str) -> str:
    if os_name not in BUNDLE_RELEASES:
        return f"bundles are resolved for {' and '.join(BUNDLE_RELEASES)} nodes only; these nodes run {os_name}"
    return f"a bundle serves one release: the first node group runs {bundle_os(cluster)}, these nodes {os_name}"


def outside_sources(cluster: Cluster) -> list[tuple[tuple, str]]:
    """(spec key, what it fetches) for every enabled feature whose packages or files a bundle lacks: only
    Ubuntu's own driver packages now (nvidia.driver.source)."""
    nv = cluster.spec.nvidia
    out = []
    if nv.driver is not None and nv.driver.source != "cuda":
        out.append((("nvidia", "driver", "source"), "the NVIDIA driver from the distribution (Ubuntu's packages)"))
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
    for i, group in unbundled(cluster):
        problems.append(Problem(where(("nodes", i, "os")), why_unbundled(cluster, group.os), f"os: {group.os}",
                                f"use packages.source: mirror for {group.os} nodes, or one release for every node"))
    for path, what in outside_sources(cluster):
        problems.append(Problem(where(path), f"{what} would come from outside the bundle, which does not carry it",
                                cluster.spec.nvidia.driver.source, "use nvidia.driver.source: cuda (bundles carry the distribution's "
                                           "packages, the vendors' repositories' and the pinned downloads)"))
    return problems
