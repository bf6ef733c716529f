"""Where a bundle's packages are resolved from, for the spec's release (spec/rules_bundle.py `bundle_os`):
the host's own sources for Debian 12 (the control host's release); a private configuration of the
release's archive for Debian 13 (virtual/apt_release.py: its suite, -updates and -security, signed by the
host's debian-archive-keyring). Where slurm.version asks for a Slurm the release does not ship (Debian 13
with 26.05: virtual/slurm_more.py), corral's cached repository of it is one more source, a local one: apt
then resolves Slurm at that version and everything it needs from the release, and the bundle carries it.

The local repository is corral's own: its packages were downloaded by exact version through the suite's
signed index (slurmd then repacked with a dependency relaxed, `+corral1`) and are kept with a manifest of their
sha256s (slurm_more.ensure checks it, fetching again on a mismatch), so apt is told to trust its unsigned flat
index. That set is made for virtual clusters, where it is proven: a bundle for real nodes (no `virtual:`) is
refused rather than carry it. Its lists are refreshed whenever its index is
newer than the private lists."""

from __future__ import annotations

from pathlib import Path

from corral.spec.releases import Release, release


def sources(cluster, status: Path) -> tuple[Release, list[str], list[Path]]:
    """(the release, apt options resolving against it, more pools to take files from before downloading), for
    bundle/build.py `build(sources=...)`. `status`: the dpkg status of a clean node of the release (its base
    image)."""
    from corral.spec.rules_bundle import bundle_os
    from corral.virtual import apt_release, image, slurm_more
    from corral.virtual.repo import repo_dir
    os_name = bundle_os(cluster)
    rel = release(os_name)
    more = slurm_more.wanted(rel, cluster.spec.slurm.version)
    if more is None:
        return rel, image.apt_options(rel), []
    major, src = more
    if cluster.spec.virtual is None:  # unstable's binaries with a repacked slurmd: proven on virtual nodes only
        from corral.errors import CorralError
        raise CorralError(f"{cluster.path}: slurm.version {cluster.spec.slurm.version}: corral's Slurm {major} for "
                          f"{os_name} is Debian {src.suite}'s binaries with slurmd repacked ({slurm_more.SUFFIX}), "
                          "made for virtual clusters; a bundle for real nodes does not carry it; nothing was built",
                          where="slurm.version", value=cluster.spec.slurm.version,
                          fix=f"use the Slurm {os_name} ships ({rel.slurm}), or install the site's own {major} "
                              "packages from its repository (packages.source: mirror)")
    base = image.apt_options(rel)
    target = slurm_more.ensure(repo_dir(os_name), major, src, image.CACHE / "apt" / src.suite, status, base)
    work = (image.CACHE / "apt" / f"bundle-{rel.suite}").resolve()
    stamp = work / "updated"
    if stamp.is_file() and (target / "Packages").stat().st_mtime > stamp.stat().st_mtime:
        stamp.unlink()  # the local repository changed since the lists were read
    text = apt_release.sources(rel) + f"deb [trusted=yes] file:{target.resolve()} ./\n"
    options = apt_release.private(text, work, f"debian {rel.suite} with corral's Slurm {major}")
    return rel, options, [target / "pool"]
