"""A Slurm major newer than a release's archive ships, for that release's virtual nodes (spec/releases.py
`slurm_more`): Debian 13 ships 24.11; `slurm.version: 26.05` gets Debian unstable's 26.05 binaries.

They go into a repository of their own beside the release's (`repo-trixie/slurm-26.05/`, flat, served at
`<repo url>slurm-26.05/`), never into the release's pool: a node is given it (one more sources line,
virtual/node.py) only on a cluster whose spec asks for that major, so every other cluster of the release
installs exactly what it did. virtual/more_repos.py names the set, virtual/suite_packages.py downloads, relaxes
(slurmd's libhwloc15, `+corral1`) and caches it.

Why not built from source here: the source package of 26.05 (`deb-src` of unstable) is listed in the
suite's index but its files are not served by the archive mirror this machine reaches (404); the binary
packages are. A site builds or mirrors its own; the docs say so.
"""

from __future__ import annotations

from corral.spec.releases import Release, SlurmFrom

MANIFEST = "corral-slurm.json"
RECIPE = 2  # what suite_packages.ensure() does for it: a change refetches the cached set


def wanted(release: Release, version: str | None) -> tuple[str, SlurmFrom] | None:
    """(major, where from) when `version` (the spec's slurm.version) is a major `release` gets elsewhere."""
    if not version:
        return None
    major = ".".join(version.split(".")[:2])
    found = release.slurm_more.get(major)
    return (major, found) if found is not None else None


def subdir(major: str) -> str:
    return f"slurm-{major}"
