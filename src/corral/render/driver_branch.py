"""A driver branch (`nvidia.driver.branch: "580"`) to an exact version (pure): the nodes' installed driver when it
is on the branch (so a re-run changes nothing until the admin asks for a newer one), else the newest version of
the branch that the configured source carries: a repository index (Packages) or apt's view of it on a node
(`apt-cache madison`). workflows/driver_branch.py reads them and pins the answer for the run."""

from __future__ import annotations

from dataclasses import dataclass

from debian.debian_support import Version

from corral.facts.slurm import upstream_version


@dataclass(frozen=True)
class Choice:
    version: str | None  # the upstream version (550.163.01), None when nothing on the branch was found
    why: str


def on_branch(deb_version: str, branch: str) -> bool:
    return upstream_version(deb_version).split(".")[0] == branch


def index_versions(text: str, package: str) -> list[str]:
    """The Debian versions of `package` in a repository's Packages index."""
    from debian import deb822
    return [p["Version"] for p in deb822.Packages.iter_paragraphs(text.splitlines(), use_apt_pkg=False)
            if p.get("Package") == package and "Version" in p]


def madison_versions(text: str) -> list[str]:
    """The versions in `apt-cache madison` output ('pkg | 550.163.01-2 | http://... Packages')."""
    return [cols[1].strip() for cols in (line.split("|") for line in text.splitlines()) if len(cols) >= 3]


def choose(branch: str, installed: dict[str, str | None], available: list[str]) -> Choice:
    """`installed`: node -> its installed Debian version of the driver package (None: none). The newest installed
    version on the branch, else the newest available one on it."""
    mine = {n: v for n, v in installed.items() if v and on_branch(v, branch)}
    if mine:
        newest = max(mine.values(), key=Version)
        on = ", ".join(sorted(n for n, v in mine.items() if v == newest))
        return Choice(upstream_version(newest), f"installed on {on}")
    found = [v for v in available if on_branch(v, branch)]
    if found:
        return Choice(upstream_version(max(found, key=Version)), "the newest of the branch in the nodes' repositories")
    others = sorted({upstream_version(v).split(".")[0] for v in available})
    return Choice(None, f"no version of branch {branch} in the nodes' repositories"
                        + (f" (they carry {', '.join(others)})" if others else "") + " and none installed")
