"""Does the bundle hold what every node needs? Per node, each package its roles and the spec's features
install (the components' declarations, components/), at the Slurm release the spec pins
(slurm.version), and what it takes from the vendors' repositories (render/vendor_repos.py; the driver at
nvidia.driver.version), compared with the bundle's manifest. `gaps` is pure; `check` reads the manifest from
the bundle file (doctor, plan and apply call it before anything changes)."""

from __future__ import annotations

import json
import tarfile

from debian.debian_support import Version

from corral.bundle.build import MANIFEST
from corral.errors import CorralError
from corral.spec import schedulers

SLURM_PACKAGES = ("slurmctld", "slurmd", "slurmdbd", "slurm-client", "libpam-slurm-adopt")


def node_needs(cluster, node) -> dict[str, str]:
    """package -> why, for one node: what its components' declarations say they may install."""
    from corral.components.views import node_packages
    return node_packages(cluster, node)


def gaps(cluster, manifest: dict) -> dict[str, list[str]]:
    """node -> what it needs that the bundle lacks ("needs slurmd (role compute): not in the bundle")."""
    from corral.spec.releases import release
    built_for = manifest.get("distribution")
    out: dict[str, list[str]] = {}
    for node in cluster.nodes:  # a bundle's packages are one Debian release's (workflows/bundle_sources.py)
        runs = f"debian {release(node.os).suite}" if node.os.startswith("debian") else node.os
        if built_for and built_for != runs:
            out.setdefault(node.name, []).append(f"runs {runs}: the bundle's packages are for {built_for}")
    if out:
        return out
    have: dict[str, list[str]] = {}
    for p in manifest.get("packages", []):
        have.setdefault(p["package"], []).append(p["version"])
    pin = schedulers.of(cluster).pinned(cluster.spec)
    for node in cluster.nodes:
        for pkg, why in sorted(node_needs(cluster, node).items()):
            versions = have.get(pkg)
            if not versions:
                out.setdefault(node.name, []).append(f"needs {pkg} ({why}): not in the bundle")
            elif pin and pkg in SLURM_PACKAGES and not any(v == pin or v.startswith(pin + ".") or
                                                            v.startswith(pin + "-") for v in versions):
                out.setdefault(node.name, []).append(
                    f"needs {pkg} {pin} (slurm.version): the bundle has {', '.join(versions)}")
    for node, pkg, version, why in _vendor_needs(cluster):
        versions = have.get(pkg)
        if not versions:
            out.setdefault(node.name, []).append(f"needs {pkg}{' ' + version if version else ''} ({why}): "
                                                 "not in the bundle")
        elif version and not any(_same(v, version) for v in versions):
            out.setdefault(node.name, []).append(f"needs {pkg} {version} ({why}): the bundle has "
                                                 f"{', '.join(versions)}")
    for d, node, why in _downloads(cluster):
        got = next((e for e in manifest.get("downloads", []) if e["file"] == d.file), None)
        if got is None:
            out.setdefault(node.name, []).append(f"needs {d.name} ({why}): not in the bundle")
        elif d.sha256 is not None and got["sha256"] != d.sha256:
            out.setdefault(node.name, []).append(f"needs {d.name} ({why}): the bundle's copy differs from "
                                                 f"{d.key}.sha256")
    return out


def _same(deb_version: str, wanted: str) -> bool:
    """A .deb version is the spec's: exactly, but for its epoch, or its upstream part (the driver:
    550.127.05 = 550.127.05-1)."""
    v = Version(deb_version)
    v.epoch = None
    return wanted in (deb_version, v.full_version, v.upstream_version)


def _vendor_needs(cluster):
    """(node, package, version or "", why) for each package a node takes from a vendor's repository
    (render/vendor_repos.py): the driver at nvidia.driver.version where corral manages it, the rest where
    its deploy installs it."""
    from corral.render.nvidia import driver_package
    from corral.render.vendor_repos import takers, vendor_repos
    driver = cluster.spec.nvidia.driver
    for repo in vendor_repos(cluster):
        for request, reasons in repo.packages.items():
            pkg, _, version = request.partition("=")
            why = reasons[0]
            if why.startswith("nvidia.driver"):
                version = driver.version
                why = "nvidia.driver.version" if why == "nvidia.driver" else why
            for node in takers(cluster, reasons[0]):
                if why != "nvidia.driver.version" or pkg == driver_package(driver, node, "debian", "12"):
                    yield node, pkg, version, why


def _downloads(cluster):
    """(download, node, why) for each node that fetches it: enroot on compute nodes, pyxis on Slurm nodes,
    nvidia-mig-parted where a MIG layout is set, the acceptance sources on GPU compute nodes."""
    from corral.bundle.downloads import wanted
    for d in wanted(cluster):
        for node in cluster.nodes:
            takes = {"nvidia.enroot": "compute" in node.roles,
                     "nvidia.pyxis": any(r in node.roles for r in ("controller", "compute", "login")),
                     "nvidia.mig_parted": node.gpus is not None and node.gpus.mig is not None,
                     }.get(d.key, bool(node.gpu_count) and "compute" in node.roles)
            if takes:
                yield d, node, d.key


def read_manifest(path) -> dict:
    try:
        with tarfile.open(path, "r:") as tar:
            return json.loads(tar.extractfile(MANIFEST).read())
    except (OSError, tarfile.TarError, KeyError, AttributeError, ValueError) as e:
        raise CorralError(f"packages.bundle: cannot read the manifest of {path} ({e})", value=str(path),
                          fix=f"corral bundle verify {path}") from None


def check(cluster) -> dict[str, list[str]]:
    """The gaps of the spec's bundle ({} when packages.source is not bundle)."""
    if cluster.spec.packages.source != "bundle":
        return {}
    from corral.bundle.serve import existing_bundle
    return gaps(cluster, read_manifest(existing_bundle(cluster)))


def refuse_gaps(cluster) -> None:
    """A CorralError naming every node's missing packages (plan and apply: before anything changes)."""
    found = check(cluster)
    if found:
        lines = [f"{node} {what}" for node, items in found.items() for what in items]
        raise CorralError(f"the bundle lacks {len(lines)} package(s) the spec needs: " + "; ".join(lines[:8])
                          + (f" (and {len(lines) - 8} more)" if len(lines) > 8 else ""),
                          value=cluster.spec.packages.bundle,
                          fix="build the bundle again from this spec (corral bundle build), then carry it over")
