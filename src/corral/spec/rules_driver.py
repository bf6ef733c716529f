"""Spec rules of the NVIDIA driver's values against where it comes from (pure), so an accepted spec finds its driver at
apply: Debian's own archive (`source: distribution`, spec/nvidia_archive.py) carries some branches at one version
each, and builds no open kernel modules for the Tesla branch; a bundle carries one exact driver, so a branch alone
cannot be resolved against it. Which release × source combinations exist at all is the support matrix's
(spec/support.py, rules_support.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from corral.errors import Problem
from corral.spec.nvidia_archive import TOOLKIT, branches, describe
from corral.spec.releases import release

if TYPE_CHECKING:
    from corral.spec.cluster import Cluster

Where = Callable[..., str]


def check_toolkit(cluster: Cluster, where: Where) -> list[Problem]:
    """Debian's CUDA toolkit at the version its archive carries (the release itself: the support matrix)."""
    cuda = cluster.spec.nvidia.cuda_toolkit
    if cuda is None or cuda.source != "distribution":
        return []
    for node in cluster.nodes:
        rel = release(node.os)
        found = TOOLKIT.get(rel.version) if rel.distro == "debian" and {"compute", "login"} & set(node.roles) else None
        if found and found[0] != cuda.version:
            return [Problem(where(("nvidia", "cuda_toolkit", "version")), f"Debian {rel.version}'s archive carries the "
                            f"CUDA toolkit {found[0]}, not {cuda.version} ({node.name} runs {rel.name})", cuda.version,
                            f"set version: \"{found[0]}\", or source: cuda (NVIDIA's repository)")]
    return []


def check_driver(cluster: Cluster, where: Where) -> list[Problem]:
    out = check_toolkit(cluster, where)
    driver = cluster.spec.nvidia.driver
    if driver is None:
        return out
    key = "branch" if driver.branch else "version"
    at = where(("nvidia", "driver", key))
    if cluster.spec.packages.source == "bundle" and driver.version is None:
        out.append(Problem(at, f"nvidia.driver.branch {driver.branch}: a bundle carries one exact driver, and a "
                               "branch is resolved from the nodes' repositories", driver.branch,
                           "set nvidia.driver.version to the version the bundle was built with"))
    if driver.source != "distribution" or driver.package:
        return out
    seen: set[str] = set()
    for node in cluster.nodes:
        rel = release(node.os) if node.gpu_count and "compute" in node.roles else None
        if rel is None or rel.distro != "debian" or rel.name in seen or not branches(rel.version):
            continue
        seen.add(rel.name)
        branch = driver.branch or (driver.version or "").split(".")[0]
        found = branches(rel.version).get(branch)
        value = driver.branch or driver.version
        if found is None:
            out.append(Problem(at, f"Debian {rel.version}'s archive carries no NVIDIA driver of branch {branch} "
                                   f"({node.name} runs {rel.name})", value,
                               f"use a branch it carries: {describe(rel.version)}; or source: cuda (NVIDIA's "
                               "repository)"))
        elif driver.version and driver.version != found.version:
            out.append(Problem(at, f"Debian {rel.version}'s archive carries the {branch} driver at {found.version}, "
                                   f"not {driver.version} ({node.name} runs {rel.name})", value,
                               f"set version: {found.version}, or branch: \"{branch}\" alone"))
        elif driver.kernel_modules == "open" and not found.open_modules:
            out.append(Problem(where(("nvidia", "driver", "kernel_modules")), f"Debian builds no open kernel modules "
                               f"for the {branch} branch ({node.name} runs {rel.name})", "open",
                               "kernel_modules: auto or proprietary, or the 550 branch"))
    return out
