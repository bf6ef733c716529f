"""The NVIDIA driver rollout, declared (`DRIVER`) for workflows/node_rollout.py: changes that need a
reboot (an NVIDIA driver version), carried out after every other component, in the batches of the
rollout policy (`rollout:`, workflows/batches.py):

  drain (Slurm: no new jobs) -> wait for running jobs (bounded) -> install the pinned version (apt
  preferences) ->
  reboot -> wait for the node (a marker in /run, a tmpfs, is gone) -> verify (GPU count and driver
  version from nvidia-smi, slurmd active) -> resume.

Nothing half-done: jobs still running at the deadline -> the node is resumed unchanged; an install
that fails -> the old pin is put back and the node resumed; a node that fails verification stays
drained with a `corral:` reason saying why, unless it can be rolled back (workflows/driver_rollback.py:
the previous version installed, rebooted into, verified, the node resumed; it still counts as failed
for the policy). Slurm not answering (scontrol, squeue, a refused drain;
workflows/slurm_node.py) stops the node's rollout before the install: never a reboot without a drain.
Each step is an OpResult on the node's result.
"""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING

from corral.deploy.nvidia_driver import FABRICMANAGER, PERSISTENCED, REBOOT, has_nvswitch
from corral.engine.handoff import DRIVER as KIND
from corral.facts.gpu import PciDevices, parse_pci_sysfs
from corral.render import apt
from corral.render.nvidia import PIN, driver_packages, fabricmanager_package, pin_for, unpinned_packages
from corral.workflows import driver_rollback
from corral.workflows.node_control import POLL_S
from corral.workflows.node_rollout import DRAIN, RESUME, ROLL_BACK, NodeRollout, NodeRun, Step, StepFailed, reboot

if TYPE_CHECKING:
    from corral.spec.cluster import Cluster
    from corral.spec.models_nvidia import DriverSpec

WHAT = "driver rollout"


# the running kernel's headers, for DKMS: refused before anything is installed when the repositories lack them
HEADERS_CHECK = ('hdr="linux-headers-$(uname -r)"\napt-cache show "$hdr" >/dev/null 2>&1 || { restore; echo "no $hdr in '
                 'this node\'s repositories: DKMS cannot build the NVIDIA module for the running kernel $(uname -r) '
                 '(reboot into the kernel the repositories have headers for)" >&2; exit 3; }\n')


def headers_script(on: bool) -> str:
    return HEADERS_CHECK if on else ""


def install_script(packages: list[str], version: str, pin: str, pin_path: str = PIN, also: tuple[str, ...] = (),
                   headers: bool = False) -> str:
    """Pin, refresh, check every package's candidate is `version`, install them together (with `also`, at their
    candidates; `headers`: the running kernel's headers, for DKMS to build the module against); on
    failure the old pin comes back."""
    q, PIN = shlex.quote, pin_path  # noqa: N806
    return f"""set -u
old={PIN}.corral-old; rm -f "$old"; [ -e {PIN} ] && cp -p {PIN} "$old"
restore() {{ if [ -e "$old" ]; then mv -f "$old" {PIN}; else rm -f {PIN}; fi; }}
printf '%s' {q(pin)} > {PIN}.corral-new && mv -f {PIN}.corral-new {PIN} || {{ restore; exit 1; }}
export DEBIAN_FRONTEND=noninteractive
apt-get update -q >/dev/null 2>&1 || {{ restore; echo 'apt-get update failed' >&2; exit 1; }}
{headers_script(headers)}{candidates_script(packages, version)}{apt.install_script([*packages, *also], downgrade=True, confold=True, words='"$hdr"' if headers else "")} || {{ restore; exit 1; }}
rm -f "$old"
"""


def candidates_script(packages: list[str], version: str) -> str:
    """Each package's apt candidate must be `version`, else the old pin comes back (exit 3)."""
    q = shlex.quote
    return "".join(f"""cand=$(apt-cache policy {q(p)} | awk '/Candidate:/ {{print $2}}'); cand=${{cand#*:}}
case "$cand" in {q(version)}-*) ;; *) restore; echo {q(f"{p} {version} is not available from this node's repositories")}" (candidate: $cand)" >&2; exit 3;; esac
""" for p in packages)


def _driver(cluster: Cluster) -> DriverSpec:
    """nvidia.driver: set wherever this rollout runs (only the driver's deploy hands nodes to it)."""
    driver = cluster.spec.nvidia.driver
    assert driver is not None
    return driver


def package_names(n: NodeRun) -> list[str]:
    """The driver's packages (+ Fabric Manager where NVSwitches are), outside a
    pyinfra run (the rollout): the OS from /etc/os-release and the PCI scan over SSH."""
    driver = _driver(n.cluster)
    os_id, _, version = n.on(". /etc/os-release; echo \"$ID $VERSION_ID\"", check=True).stdout.strip().partition(" ")
    n.state.os_id = os_id
    packages = driver_packages(driver, n.node, os_id, version)
    pci = n.on(PciDevices().command().get_raw_value(), check=True).stdout.splitlines()
    fm = [fabricmanager_package(driver)] if has_nvswitch(parse_pci_sysfs(pci)) else []
    return packages + fm


def dkms_note(n: NodeRun) -> str:
    """Where the driver's kernel module comes from DKMS and the running kernel has no headers (a virtual node runs
    the host's kernel): that the module was not built, and why."""
    if not any(p.endswith("kernel-dkms") for p in n.state.packages):
        return ""
    p = n.on("k=$(uname -r); [ -e /lib/modules/$k/build ] && echo built || echo \"$k\"")
    kernel = p.stdout.strip()
    if p.returncode != 0 or kernel == "built":
        return ""
    return (f"; DKMS: the module was not built, no headers for the running kernel {kernel} on this node (a virtual "
            "node runs the host's kernel: its device layer is emulated)")


def verify(n: NodeRun, version: str) -> str:
    """nvidia-smi: the node's GPUs, all on `version`; Fabric Manager running where it belongs; then
    slurmd registered with slurmctld again (never resumed before that)."""
    count, fabricmanager = n.node.gpu_count, any(p.startswith(FABRICMANAGER) for p in n.state.packages)
    n.on(f"systemctl enable --now {PERSISTENCED} >/dev/null 2>&1 || true")  # absent: nothing to start
    if fabricmanager:
        p = n.on(f"systemctl enable --now {FABRICMANAGER} && systemctl is-active {FABRICMANAGER}")
        if p.returncode != 0:
            raise StepFailed("verify", f"{FABRICMANAGER} does not run: {(p.stderr or p.stdout).strip()[-160:]}",
                             keep_drained=True)
    deadline = n.clock.monotonic() + n.policy.verify_timeout
    while True:
        p = n.on("nvidia-smi --query-gpu=driver_version --format=csv,noheader")
        found = [v.strip() for v in p.stdout.splitlines() if v.strip()]
        if p.returncode == 0 and len(found) == count and set(found) == {version}:
            break
        last = (f"nvidia-smi failed (rc={p.returncode}): {p.stderr.strip()[-120:]}" if p.returncode
                else f"found {len(found)} GPUs on driver {', '.join(sorted(set(found))) or 'none'}, "
                     f"expected {count} on {version}")
        if n.clock.monotonic() + POLL_S > deadline:
            raise StepFailed("verify", f"{last} ({n.policy.verify_timeout} s after the reboot)", keep_drained=True)
        n.clock.sleep(POLL_S)
    if n.known:
        n.control.registered(n.name)
    return f"{count} GPUs on driver {version}" + ("; slurmd registered" if n.known else "")


def install(n: NodeRun, version: str) -> str:
    """Pin and install `version` (the old pin comes back when it fails: the node is as before). Debian's archive
    driver: with nvidia-persistenced, and on real servers the running kernel's headers for DKMS."""
    driver, packages = _driver(n.cluster), n.state.packages
    os_id = getattr(n.state, "os_id", "")
    also = tuple(unpinned_packages(driver, os_id))
    headers = bool(also) and n.cluster.spec.virtual is None
    script = install_script(packages, version, pin_for(packages, version, driver.package is not None), also=also,
                            headers=headers)
    p = n.on(script, timeout=900)
    if p.returncode != 0:
        raise StepFailed("install", f"rc={p.returncode}: {(p.stderr or p.stdout).strip()[-300:]}", keep_drained=False)
    return f"{', '.join(packages)} {version} installed and pinned" + (f" (with {', '.join(also)})" if also else "") \
        + dkms_note(n)


def prepare(n: NodeRun) -> None:
    """The packages and the driver installed now (the rollback's version)."""
    n.state.packages = package_names(n)
    n.state.previous = driver_rollback.previous_version(n, n.state.packages[0])


def _version(n: NodeRun) -> str:
    """The exact version: the spec's, or its branch resolved before the run (workflows/driver_branch.py)."""
    version = _driver(n.cluster).version
    assert version is not None, "nvidia.driver.branch is resolved before a rollout runs"
    return version


DRIVER = NodeRollout(
    kind=KIND, what=WHAT, disruption=REBOOT, prepare=prepare,
    steps=(DRAIN,
           Step("install", lambda n: install(n, _version(n)), changes=True),
           Step("reboot", reboot),
           Step("verify", lambda n: verify(n, _version(n))),
           RESUME),
    reason=lambda c: f"corral: driver {_driver(c).version} rollout",
    blame=lambda c: f"corral: driver {_driver(c).version}",
    on_failure=ROLL_BACK, roll_back_at=frozenset({"reboot", "verify"}), rollback=driver_rollback.attempt)
