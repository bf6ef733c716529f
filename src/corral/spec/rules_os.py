"""Spec rules of the nodes' OS releases (`nodes[].os`, spec/releases.py) and the Slurm they can give.

A release's own archive gives one Slurm major (Debian 12: 22.05, Debian 13: 24.11). A `slurm.version`
newer than that comes from another repository (a site's, or a bundle) and stays the operator's call;
an older one cannot be installed there (Debian packages no older Slurm for a newer release, and its
libraries would not match), so it is refused where the spec says it. Slurm daemons of one cluster
must run one major (slurmctld refuses a slurmd newer than itself; the supported mix is a rolling upgrade,
which corral does with `slurm.version`), so without `slurm.version` every node group must be on a
release that ships the same major. A release row corral cannot deploy (Rocky 9: dnf, and corral's
package steps are apt's) or the virtual cluster cannot build (it debootstraps Debian suites) is refused
where the group names it; a release corral's tests have not run on a live node is warned about. Pure: no I/O.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from corral.errors import Problem
from corral.spec.releases import RELEASES, deployable, release, slurm_major, virtual_ok
from corral.spec.slurm_releases import parts

if TYPE_CHECKING:
    from corral.spec.cluster import Cluster

Where = Callable[..., str]


def check_os(cluster: Cluster, where: Where) -> list[Problem]:
    """Every group's `os` is a release corral knows, can deploy, and (virtual cluster) can build."""
    import difflib
    problems = []
    apt = [n for n, r in RELEASES.items() if deployable(r)]
    for gi, group in enumerate(cluster.spec.nodes):
        at = where(("nodes", gi, "os"))
        if group.os not in RELEASES:
            close = difflib.get_close_matches(group.os, list(RELEASES), n=1)
            problems.append(Problem(at, f"unknown OS release {group.os!r}", group.os,
                                    f"did you mean {close[0]!r}?" if close
                                    else f"choose from: {', '.join(RELEASES)}"))
            continue
        rel = release(group.os)
        if not deployable(rel):
            names = ", ".join(dict.fromkeys(p for p in rel.renamed.values() if p.startswith("slurm")))
            problems.append(Problem(
                at, f"{group.os}: corral cannot deploy these nodes yet: its package steps (install, Slurm's "
                    f"version pin, upgrades and holds) are apt's, and {group.os} installs with {rel.family} "
                    f"(Slurm {rel.slurm_package}: {names}); the row is data only (spec/releases.py)",
                group.os, f"run these nodes on {', '.join(apt)}"))
        elif cluster.spec.virtual is not None and not virtual_ok(rel):
            problems.append(Problem(
                at, f"{group.os}: the virtual cluster builds Debian nodes only (debootstrap of a Debian suite "
                    "from Debian's archive)", group.os,
                f"use os: {' or '.join(n for n, r in RELEASES.items() if virtual_ok(r))} in a virtual cluster"))
    return problems


def release_warnings(cluster: Cluster) -> list[str]:
    """The releases the spec names that corral's tests have not run on a live node."""
    out = []
    for name in cluster.releases():
        rel = RELEASES.get(name)
        if rel is not None and deployable(rel) and not rel.live:
            out.append(f"os {name} ({rel.distro} {rel.suite}, Slurm {rel.slurm}): not run on a live node by corral's "
                       "tests (written from its package lists and tested offline; docs/releases.md)")
    return out


def check_slurm_release(cluster: Cluster, where: Where) -> list[Problem]:
    """`slurm.version` against what each group's release can give; one Slurm major across releases."""
    groups = [(gi, g.os) for gi, g in enumerate(cluster.spec.nodes) if g.os in RELEASES and deployable(release(g.os))]
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
