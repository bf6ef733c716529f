"""nvidia driver: the NVIDIA driver version the spec names on GPU compute nodes, pinned by apt
preferences, nouveau blacklisted. A version change needs a reboot: the plan labels it
"reboot + drain" and the change itself is carried out after every other component by
ops/rollout.py, one node at a time (drain, wait for jobs, install, reboot, verify, resume).
Skipped, with the reason in the plan, where corral does not own the driver (no GPUs, DGX OS,
nvidia.driver unset)."""

from __future__ import annotations

import hashlib
import shlex

from pyinfra import host
from pyinfra.api import StringCommand, deploy, operation
from pyinfra.facts.server import LinuxDistribution

from corral.deploy import ops
from corral.deploy.nodestate import Want, register, snapshot
from corral.deploy.notes import annotate
from corral.render.nvidia import BLACKLIST, BLACKLIST_TEXT, PIN, driver_package, installed_matches, pin_text

DGX_RELEASE = "/etc/dgx-release"
REBOOT = "reboot + drain"
WANT = register(Want(paths=(PIN, BLACKLIST, DGX_RELEASE)))
_PACKAGES: set[str] = set()


def package_for(driver, node) -> str:
    if driver.package:
        return driver.package
    dist = host.get_fact(LinuxDistribution)
    meta = dist.get("release_meta") or {}
    return driver_package(driver, node, meta.get("ID", dist.get("name") or "?"),
                          meta.get("VERSION_ID", str(dist.get("major"))))


def package_name(cluster, node) -> str:
    """package_for() outside a pyinfra run (the rollout): the OS from /etc/os-release over SSH."""
    driver = cluster.spec.nvidia.driver
    if driver.package:
        return driver.package
    from corral.engine.remote import run_on
    os_id, _, version = run_on(cluster, node.name, ". /etc/os-release; echo \"$ID $VERSION_ID\"",
                               check=True).stdout.strip().partition(" ")
    return driver_package(driver, node, os_id, version)


@operation()
def driver_version(package: str, version: str, overridden: bool):
    """The driver at `version`: nothing to do, the pin or the nouveau blacklist to restore, or a
    change for the rollout (DGX OS: nothing, its driver belongs to NVIDIA's DGX stack)."""
    snap = snapshot(Want(paths=WANT.paths, packages=(package,)))
    if (snap.files.get(DGX_RELEASE) or {}).get("kind") == "file":
        host.noop("skipped: DGX OS: the driver is managed by NVIDIA's DGX software stack")
        return
    installed = snap.packages.get(package)
    pin = pin_text(package, version, overridden)
    files = [(path, text) for path, text in ((BLACKLIST, BLACKLIST_TEXT), (PIN, pin))
             if (snap.files.get(path) or {}).get("sha256") != _sha(text)]
    if installed_matches(installed, version):
        if not files:
            host.noop(f"NVIDIA driver {version} installed and pinned ({package} {installed})")
            return
        annotate(disruption="none", diff="".join(f"{path}: restored\n" for path, _ in files))
        for path, text in files:
            yield from ops.install_commands(path, text.encode(), "644", "root", "root")
        return
    annotate(disruption=REBOOT, diff=f"{package}: {installed or 'not installed'} -> {version} "
                                     "(drain, wait for jobs, install, reboot, verify, resume; one node at a time)\n")
    for path, text in files:
        if path == BLACKLIST:  # read at the reboot to come; the pin comes with the install
            yield from ops.install_commands(path, text.encode(), "644", "root", "root")
    yield StringCommand("echo", shlex.quote(f"NVIDIA driver {installed or 'none'} -> {version}: rolled out after "
                                            "the other components, one node at a time"))


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def skip_reason(cluster, node) -> str | None:
    """Why this node gets no driver step (None: it does; DGX OS is found by the op itself)."""
    if not node.gpu_count or "compute" not in node.roles:
        return "no GPUs on this node"
    if cluster.spec.nvidia.driver is None:
        return "nvidia.driver is not set: corral leaves the installed driver alone"
    return None


@deploy("nvidia driver")
def nvidia_driver() -> None:
    node, cluster = host.data.corral_node, host.data.corral_cluster
    reason = skip_reason(cluster, node)
    if reason == "no GPUs on this node":
        return
    if reason:
        ops.skip(name="NVIDIA driver", reason=reason)
        return
    driver = cluster.spec.nvidia.driver
    package = package_for(driver, node)
    if package not in _PACKAGES:  # read with every node's one snapshot, not a second command
        _PACKAGES.add(package)
        register(Want(packages=(package,)))
    driver_version(name=f"NVIDIA driver {driver.version}", package=package,
                   version=driver.version, overridden=driver.package is not None)
