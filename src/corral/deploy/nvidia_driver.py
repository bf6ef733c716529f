"""nvidia driver: the NVIDIA driver version the spec names on GPU compute nodes, pinned (apt
preferences), nouveau blacklisted. A version change needs a reboot: the plan labels it
"reboot + drain" and the change itself is carried out after every other component by
workflows/driver_rollout.py, one node at a time (drain, wait for jobs, install, reboot, verify, resume).
Where NVSwitches are (PCI scan), NVIDIA Fabric Manager comes with the driver, at its version.
nvidia-persistenced and Fabric Manager are kept enabled and running once the driver is in place.
Skipped, with the reason in the plan, where corral does not own the driver (no GPUs, DGX OS,
nvidia.driver unset)."""

from __future__ import annotations

import hashlib

from pyinfra import host
from pyinfra.api import deploy, operation

from corral.engine.shell import cmd
from pyinfra.facts.server import LinuxDistribution

from corral.deploy import operations
from corral.errors import UsageError
from corral.engine.run_context import current as run
from corral.deploy.installs import installs
from corral.deploy.nodestate import Want, register, register_for_run, snapshot
from corral.engine.handoff import DRIVER, Handoff
from corral.engine.notes import annotate
from corral.facts.gpu import PciDevices, classify
from corral.deploy.nvidia_repo import cuda_repository
from corral.render.nvidia import (BLACKLIST, BLACKLIST_TEXT, PIN, driver_packages, fabricmanager_package,
                                  installed_matches, pin_for)

DGX_RELEASE = "/etc/dgx-release"
REBOOT = "reboot + drain"
PERSISTENCED, FABRICMANAGER = "nvidia-persistenced", "nvidia-fabricmanager"
WANT = register(Want(paths=(PIN, BLACKLIST, DGX_RELEASE), services=(PERSISTENCED, FABRICMANAGER)))


def os_of() -> tuple[str, str]:
    """(ID, VERSION_ID) of this node's /etc/os-release."""
    dist = host.get_fact(LinuxDistribution)
    meta = dist.get("release_meta") or {}
    return meta.get("ID", dist.get("name") or "?"), meta.get("VERSION_ID", str(dist.get("major")))


def packages_for(driver, node) -> list[str]:
    """The packages held at the driver's version on this node, the driver's own first."""
    return driver_packages(driver, node, *os_of())


def has_nvswitch(devices: list[dict]) -> bool:
    return bool(classify(devices)["nvswitches"])


@installs(lambda packages, version, overridden, **_: {BLACKLIST: BLACKLIST_TEXT,
                                                     PIN: pin_for(packages, version, overridden)})
@operation()
def driver_version(packages: list[str], version: str, overridden: bool, loaded: str = ""):
    """The driver (and Fabric Manager) at `version`: nothing to do, the pin, the nouveau blacklist or
    a daemon to restore, or a change for the rollout (DGX OS: nothing, NVIDIA's DGX stack owns it)."""
    snap = snapshot(Want(paths=WANT.paths, services=WANT.services, packages=tuple(packages)))
    if (snap.files.get(DGX_RELEASE) or {}).get("kind") == "file":
        host.noop("skipped: DGX OS: the driver is managed by NVIDIA's DGX software stack")
        return
    installed = snap.packages.get(packages[0])
    pin = pin_for(packages, version, overridden)
    files = [(path, text) for path, text in ((BLACKLIST, BLACKLIST_TEXT), (PIN, pin))
             if (snap.files.get(path) or {}).get("sha256") != _sha(text)]
    behind = [p for p in packages if not installed_matches(snap.packages.get(p), version)]
    if not behind and loaded and loaded != version:  # installed, but the running module is another one
        annotate(disruption=REBOOT, diff=f"nvidia kernel module: {loaded} running, {version} installed: reboot "
                                         "required\n(drain, wait for jobs, reboot, verify, resume)\n",
                 rollout=Handoff(DRIVER, loaded, version))
        yield cmd("echo", f"NVIDIA driver {version} installed, {loaded} loaded: rebooted by "
                          "the rollout after the other components")
        return
    if not behind:
        daemons = [PERSISTENCED] + ([FABRICMANAGER] if any(p.startswith(FABRICMANAGER) for p in packages) else [])
        stopped = [d for d in daemons if snap.services.get(d, ("", "not-found"))[1] != "not-found"
                   and snap.services[d] != ("active", "enabled")]
        if not files and not stopped:
            host.noop(f"NVIDIA driver {version} installed and pinned ({', '.join(packages)} {installed})")
            return
        annotate(disruption="none" if not stopped else f"start {', '.join(stopped)}",
                 diff="".join(f"{path}: restored\n" for path, _ in files))
        for path, text in files:
            yield from operations.install_commands(path, text.encode(), "644", "root", "root")
        for d in stopped:
            yield cmd("systemctl", "enable", "--now", d)
        return
    annotate(disruption=REBOOT, diff="".join(
        f"{p}: {snap.packages.get(p) or 'not installed'} -> {version}\n" for p in behind)
        + "(drain, wait for jobs, install, reboot, verify, resume; one node at a time)\n",
        rollout=Handoff(DRIVER, installed or None, version))
    for path, text in files:
        if path == BLACKLIST:  # read at the reboot to come; the pin comes with the install
            yield from operations.install_commands(path, text.encode(), "644", "root", "root")
    yield cmd("echo", f"NVIDIA driver {installed or 'none'} -> {version}: rolled out after "
                      "the other components, one node at a time")


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
        operations.skip(name="NVIDIA driver", reason=reason)
        return
    driver = cluster.spec.nvidia.driver
    packages = packages_for(driver, node)
    if has_nvswitch(host.get_fact(PciDevices)):  # Fabric Manager, version locked to the driver
        if driver.source == "distribution" and not driver.package and os_of()[0].lower() == "debian":
            raise UsageError(f"{node.name} has NVSwitches, which need NVIDIA Fabric Manager at the driver's version; "
                             "the release's own archive does not package it (Debian: no nvidia-fabricmanager)",
                             value="nvidia.driver.source: distribution", fix="use nvidia.driver.source: cuda (NVIDIA's "
                             "repository carries nvidia-fabricmanager-<branch>) for NVSwitch systems")
        packages.append(fabricmanager_package(driver))
    if driver.source == "cuda" and cluster.spec.virtual is None:  # the rollout installs from it
        cuda_repository(name="NVIDIA CUDA repository", repo_url=driver.repo_url, want=WANT)
    register_for_run(Want(packages=tuple(packages)))  # read with every node's one snapshot, not a second command
    facts = run().hw.get(node.name)
    driver_version(name=f"NVIDIA driver {driver.version}", packages=packages, version=driver.version,
                   overridden=driver.package is not None, loaded=facts.driver_loaded if facts else "")
