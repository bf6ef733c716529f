"""Where a bundle's packages are resolved from, for the spec's release (spec/rules_bundle.py `bundle_os`):
the host's own sources for Debian 12 (the control host's release); a private configuration of the
release's archive for Debian 13 (virtual/apt_release.py: its suite, -updates and -security, signed by the
host's debian-archive-keyring). Where the spec asks for packages the release does not ship (virtual/more_repos.py:
Debian 13 with Slurm 26.05, virtual/slurm_more.py; apptainer, spec/apptainer_source.py), corral's cached
repository of each is one more source, a local one: apt then resolves them at their version and everything they
need from the release, and the bundle carries them.

The local repositories are corral's own: their packages were downloaded by exact version through the suite's
signed index (slurmd then repacked with a dependency relaxed, `+corral1`) and are kept with a manifest of their
sha256s (suite_packages.ensure checks it, fetching again on a mismatch), so apt is told to trust their unsigned
flat indexes. A set with a repacked package (Slurm 26.05) is made for virtual clusters, where it is proven: a
bundle for real nodes (no `virtual:`) is refused rather than carry it; apptainer is Debian's package as built,
carried for real nodes too. Their lists are refreshed whenever an index is newer than the private lists."""

from __future__ import annotations

from pathlib import Path

from corral.spec.releases import Release, release


def sources(cluster, status: Path) -> tuple[Release, list[str], list[Path]]:
    """(the release, apt options resolving against it, more pools to take files from before downloading), for
    bundle/build.py `build(sources=...)`. `status`: the dpkg status of a clean node of the release (its base
    image)."""
    from corral.spec.rules_bundle import bundle_os
    from corral.virtual import apt_release, image, more_repos, slurm_more
    from corral.virtual.repo import repo_dir
    os_name = bundle_os(cluster)
    rel = release(os_name)
    sets = more_repos.wanted(cluster, os_name)
    if not sets:
        return rel, image.apt_options(rel), []
    slurm = slurm_more.wanted(rel, cluster.spec.slurm.version)  # the one set with a repacked package
    if cluster.spec.virtual is None and slurm is not None and not all(s.real_nodes for s in sets):
        from corral.errors import CorralError
        from corral.virtual.suite_packages import SUFFIX
        major, src = slurm  # repacked: proven on virtual nodes only
        raise CorralError(f"{cluster.path}: slurm.version {cluster.spec.slurm.version}: corral's Slurm {major} for "
                          f"{os_name} is Debian {src.suite}'s binaries with slurmd repacked ({SUFFIX}), "
                          "made for virtual clusters; a bundle for real nodes does not carry it; nothing was built",
                          where="slurm.version", value=cluster.spec.slurm.version,
                          fix=f"use the Slurm {os_name} ships ({rel.slurm}), or install the site's own {major} "
                              "packages from its repository (packages.source: mirror)")
    base = image.apt_options(rel)
    targets = more_repos.ensure(repo_dir(os_name), sets, image.CACHE / "apt", status, base)
    work = (image.CACHE / "apt" / f"bundle-{rel.suite}").resolve()
    stamp = work / "updated"
    if stamp.is_file() and any((t / "Packages").stat().st_mtime > stamp.stat().st_mtime for t in targets):
        stamp.unlink()  # a local repository changed since the lists were read
    text = apt_release.sources(rel) + "".join(f"deb [trusted=yes] file:{t.resolve()} ./\n" for t in targets)
    options = apt_release.private(text, work, f"debian {rel.suite} with corral's {', '.join(s.what for s in sets)}")
    return rel, options, [t / "pool" for t in targets]
