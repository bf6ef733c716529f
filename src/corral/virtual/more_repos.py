"""The repositories beside a release's that a spec asks for (virtual/suite_packages.py makes each): a newer Slurm
than the release ships (slurm.version, virtual/slurm_more.py) and apptainer (images.apptainer with source corral,
spec/apptainer_source.py). The virtual cluster serves each as `<repo url><subdir>/` to its nodes (virtual/node.py);
a bundle resolves from them beside the release's archive and carries what they hold (workflows/bundle_sources.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from corral.spec.releases import SlurmFrom as FromSuite, release
from corral.virtual import slurm_more, suite_packages


@dataclass(frozen=True)
class SuiteSet:
    subdir: str        # its repository under the release's: repo-trixie/<subdir>/
    what: str          # how messages name it
    src: FromSuite
    manifest: str      # its cache's manifest file
    recipe: int        # suite_packages.ensure's recipe for it (a change refetches the set)
    real_nodes: bool   # a bundle for real nodes may carry it (no repacked package in it)


APPTAINER_MANIFEST, APPTAINER_RECIPE = "corral-apptainer.json", 1


def wanted(cluster, os_name: str) -> list[SuiteSet]:
    """The sets the spec asks for on `os_name`'s nodes, in a fixed order."""
    from corral.spec.apptainer_source import SUBDIR, corral_set
    out = []
    slurm = slurm_more.wanted(release(os_name), cluster.spec.slurm.version)
    if slurm is not None:
        major, src = slurm
        out.append(SuiteSet(slurm_more.subdir(major), f"Slurm {src.version}", src, slurm_more.MANIFEST,
                            slurm_more.RECIPE, real_nodes=not src.relaxed))
    apptainer = corral_set(cluster, os_name)
    if apptainer is not None:
        out.append(SuiteSet(SUBDIR, f"apptainer {apptainer.version}", apptainer, APPTAINER_MANIFEST,
                            APPTAINER_RECIPE, real_nodes=not apptainer.relaxed))
    return out


def ensure(repo: Path, sets: list[SuiteSet], apt_cache: Path, status: Path, release_options: list[str]) -> list[Path]:
    """Each set's repository under `repo` (apt's private state of each suite under `apt_cache`), made or checked."""
    return [suite_packages.ensure(repo / s.subdir, s.what, s.src, apt_cache / s.src.suite, status, release_options,
                                  s.manifest, s.recipe) for s in sets]
