"""Spec rules of the nodes' OS releases (`nodes[].os`, spec/releases.py) and the Slurm they can give.

A release's own archive gives one Slurm major (Debian 12: 22.05, Debian 13: 24.11). A `slurm.version`
newer than that comes from another repository (a site's, or a bundle) and stays the operator's call;
an older one cannot be installed there (Debian packages no older Slurm for a newer release, and its
libraries would not match), so it is refused where the spec says it. Slurm daemons of one cluster
must run one major (slurmctld refuses a slurmd newer than itself; the supported mix is a rolling upgrade,
which corral does with `slurm.version`), so without `slurm.version` every node group must be on a
release that ships the same major. Pure: no I/O.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from corral.errors import Problem
from corral.spec.releases import RELEASES, release, slurm_major
from corral.spec.slurm_releases import parts

if TYPE_CHECKING:
    from corral.spec.cluster import Cluster

Where = Callable[..., str]


def check_os(cluster: Cluster, where: Where) -> list[Problem]:
    """Every group's `os` is a release corral knows."""
    import difflib
    problems = []
    for gi, group in enumerate(cluster.spec.nodes):
        if group.os not in RELEASES:
            close = difflib.get_close_matches(group.os, list(RELEASES), n=1)
            problems.append(Problem(where(("nodes", gi, "os")), f"unknown OS release {group.os!r}", group.os,
                                    f"did you mean {close[0]!r}?" if close
                                    else f"choose from: {', '.join(RELEASES)}"))
    return problems


def check_slurm_release(cluster: Cluster, where: Where) -> list[Problem]:
    """`slurm.version` against what each group's release can give; one Slurm major across releases."""
    groups = [(gi, g.os) for gi, g in enumerate(cluster.spec.nodes) if g.os in RELEASES]
    wanted = cluster.spec.slurm.version
    problems = []
    if wanted:
        for gi, name in groups:
            own = release(name).slurm
            if parts(slurm_major(wanted)) < parts(own):
                problems.append(Problem(
                    where(("slurm", "version")),
                    f"Slurm {wanted} cannot run on {name} (nodes[{gi}]: {cluster.spec.nodes[gi].names}): "
                    f"{release(name).suite} ships Slurm {own}, and no older Slurm is packaged for it",
                    wanted, f"set slurm.version to {own} or later, or run those nodes on an older release"))
        return problems
    shipped = {release(name).slurm for _, name in groups}
    if len(shipped) > 1:
        first = groups[0][1]
        for gi, name in groups:
            if release(name).slurm != release(first).slurm:
                problems.append(Problem(
                    where(("nodes", gi, "os")),
                    f"{name} ships Slurm {release(name).slurm} but nodes[{groups[0][0]}] run {first} with "
                    f"Slurm {release(first).slurm}: one cluster's Slurm daemons run one major release",
                    name, f"put every node group on the same os, or set slurm.version to a release all of "
                          f"them can run ({max(shipped, key=parts)} or later, from a repository that has it)"))
    return problems


def slurm_release_warnings(cluster: Cluster) -> list[str]:
    """A `slurm.version` newer than a group's release ships: where its packages come from."""
    wanted = cluster.spec.slurm.version
    if not wanted:
        return []
    out = []
    for name in cluster.releases():
        rel = release(name)
        if name not in RELEASES or parts(slurm_major(wanted)) <= parts(rel.slurm):
            continue
        more = rel.slurm_more.get(slurm_major(wanted))
        if more is not None and cluster.spec.virtual is not None:
            continue  # the virtual cluster serves them (virtual/slurm_more.py); said in docs/components/slurm.md
        whence = (f"the virtual cluster serves Debian {more.suite}'s {more.version} packages" if more
                  else "corral knows no packages of it for this release")
        out.append(f"slurm.version {wanted}: {rel.suite} ships Slurm {rel.slurm}; {whence}, so {name} nodes "
                   f"need a repository that has Slurm {slurm_major(wanted)} (a site mirror or a bundle that "
                   "carries it) or the upgrade stops at its first install")
    return out
