"""Changes that need a reboot (an NVIDIA driver version), carried out after every other component,
in the batches of the rollout policy (`rollout:`, workflows/batches.py):

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
import time
from collections.abc import Callable

from corral.deploy.nvidia_driver import FABRICMANAGER, PERSISTENCED, REBOOT, has_nvswitch
from corral.facts.gpu import PciDevices, parse_pci_sysfs
from corral.render.nvidia import driver_package, fabricmanager_package
from corral.engine.remote import run_on
from corral.engine.results import OpResult, TimedSteps, RunResult
from corral.errors import CorralError, NodeError
from corral.parallel import pmap
from corral.workflows import driver_rollback
from corral.workflows.slurm_node import POLL_S, SlurmNode, StepFailed, settle
from corral.render.nvidia import PIN, pin_text
from corral.spec.cluster import Cluster
from corral.spec.rules_rollout import policy
from corral.workflows import batches
from corral import paths

MARKER = paths.REBOOT_MARKER


def pending(result: RunResult) -> list[str]:
    """Nodes whose apply left a change labelled "reboot + drain" for the rollout."""
    return [name for name, n in result.nodes.items()
            if n.ok and any(o.status == "changed" and o.disruption == REBOOT for o in n.ops)]


def install_script(packages: list[str], version: str, pin: str, pin_path: str = PIN) -> str:
    """Pin, refresh, check every package's candidate is `version`, install them together; on
    failure the old pin comes back."""
    q, PIN = shlex.quote, pin_path  # noqa: N806
    return f"""set -u
old={PIN}.corral-old; rm -f "$old"; [ -e {PIN} ] && cp -p {PIN} "$old"
restore() {{ if [ -e "$old" ]; then mv -f "$old" {PIN}; else rm -f {PIN}; fi; }}
printf '%s' {q(pin)} > {PIN}.corral-new && mv -f {PIN}.corral-new {PIN} || {{ restore; exit 1; }}
export DEBIAN_FRONTEND=noninteractive
apt-get update -q >/dev/null 2>&1 || {{ restore; echo 'apt-get update failed' >&2; exit 1; }}
{candidates_script(packages, version)}apt-get install -y -q --allow-downgrades -o Dpkg::Options::=--force-confold {" ".join(q(p) for p in packages)} || {{ restore; exit 1; }}
rm -f "$old"
"""


def candidates_script(packages: list[str], version: str) -> str:
    """Each package's apt candidate must be `version`, else the old pin comes back (exit 3)."""
    q = shlex.quote
    return "".join(f"""cand=$(apt-cache policy {q(p)} | awk '/Candidate:/ {{print $2}}'); cand=${{cand#*:}}
case "$cand" in {q(version)}-*) ;; *) restore; echo {q(f"{p} {version} is not available from this node's repositories")}" (candidate: $cand)" >&2; exit 3;; esac
""" for p in packages)


def package_names(cluster, node) -> list[str]:
    """The driver package (+ Fabric Manager where NVSwitches are), outside a
    pyinfra run (the rollout): the OS from /etc/os-release and the PCI scan over SSH."""
    driver = cluster.spec.nvidia.driver
    os_id, _, version = run_on(cluster, node.name, ". /etc/os-release; echo \"$ID $VERSION_ID\"",
                               check=True).stdout.strip().partition(" ")
    package = driver.package or driver_package(driver, node, os_id, version)
    pci = run_on(cluster, node.name, PciDevices().command().get_raw_value(), check=True).stdout.splitlines()
    fm = [fabricmanager_package(driver)] if has_nvswitch(parse_pci_sysfs(pci)) else []
    return [package] + fm


class Rollout(SlurmNode):
    def __init__(self, cluster: Cluster, say: Callable[[str], None] | None = None) -> None:
        self.cluster, self.say = cluster, say or (lambda line: None)
        ctl = cluster.with_role("controller")
        self.controller = ctl[0].name if ctl else None
        self.r = policy(cluster.spec)

    def sc(self, command: str, timeout: float = 30):
        return run_on(self.cluster, self.controller, command, timeout=timeout)

    def on(self, node: str, command: str, timeout: float = 60, **kw):
        return run_on(self.cluster, node, command, timeout=timeout, **kw)

    def reboot(self, node: str) -> None:
        self.on(node, f"touch {MARKER} && systemd-run --on-active=1 systemctl reboot >/dev/null", check=True)
        deadline = time.monotonic() + self.r.reboot_timeout
        while time.monotonic() < deadline:
            time.sleep(POLL_S)
            try:
                if self.on(node, f"test ! -e {MARKER} && systemctl is-active slurmd", timeout=15).returncode == 0:
                    return
            except NodeError:
                continue  # not answering yet
        raise StepFailed("reboot", f"no answer with slurmd running within {self.r.reboot_timeout} s after the reboot",
                         keep_drained=True)

    def verify(self, node: str, version: str, count: int, fabricmanager: bool) -> str:
        """nvidia-smi: `count` GPUs, all on `version`; Fabric Manager running where it belongs."""
        self.on(node, f"systemctl enable --now {PERSISTENCED} >/dev/null 2>&1 || true")  # absent: nothing to start
        if fabricmanager:
            p = self.on(node, f"systemctl enable --now {FABRICMANAGER} && systemctl is-active {FABRICMANAGER}")
            if p.returncode != 0:
                raise StepFailed("verify", f"{FABRICMANAGER} does not run: {(p.stderr or p.stdout).strip()[-160:]}",
                                 keep_drained=True)
        last, deadline = "", time.monotonic() + self.r.verify_timeout
        while True:
            p = self.on(node, "nvidia-smi --query-gpu=driver_version --format=csv,noheader")
            found = [v.strip() for v in p.stdout.splitlines() if v.strip()]
            if p.returncode == 0 and len(found) == count and set(found) == {version}:
                return f"{count} GPUs on driver {version}"
            last = (f"nvidia-smi failed (rc={p.returncode}): {p.stderr.strip()[-120:]}" if p.returncode
                    else f"found {len(found)} GPUs on driver {', '.join(sorted(set(found))) or 'none'}, "
                         f"expected {count} on {version}")
            if time.monotonic() + POLL_S > deadline:
                raise StepFailed("verify", f"{last} ({self.r.verify_timeout} s after the reboot)", keep_drained=True)
            time.sleep(POLL_S)

    def install(self, node_name: str, packages: list[str], version: str) -> None:
        """Pin and install `version` (the old pin comes back when it fails: the node is as before)."""
        driver = self.cluster.spec.nvidia.driver
        script = install_script(packages, version, pin_text(packages[0], version, driver.package is not None))
        p = self.on(node_name, script, timeout=900)
        if p.returncode != 0:
            raise StepFailed("install", f"rc={p.returncode}: {(p.stderr or p.stdout).strip()[-300:]}",
                             keep_drained=False)

    def one(self, node_name: str) -> tuple[list[OpResult], str | None]:
        node, driver = self.cluster.node(node_name), self.cluster.spec.nvidia.driver
        done: list[OpResult] = TimedSteps()

        def ok(step: str, reason: str) -> None:
            done.append(OpResult(name=f"driver rollout | {step}", status="changed", reason=reason, disruption=REBOOT))
            self.say(f"node {node_name}: driver rollout: {step}: {reason}")

        ours = f"corral: driver {driver.version} rollout"
        known: bool | None = None  # None: Slurm not asked yet, or not answering (nothing changed)
        touched = False  # the install began, the node may differ from before
        packages, previous = [], None
        try:
            packages = package_names(self.cluster, node)
            previous = driver_rollback.previous_version(self, node_name, packages[0])
            known = self.controller is not None and self.node_reason(node_name) is not None
            if known:
                self.drain_and_wait(node_name, ours, ok)
            touched = True
            self.install(node_name, packages, driver.version)
            ok("install", f"{', '.join(packages)} {driver.version} installed and pinned")
            self.reboot(node_name)
            ok("reboot", "rebooted; SSH and slurmd back")
            verified = self.verify(node_name, driver.version, node.gpu_count, len(packages) > 1)
            if known:
                self.registered(node_name)  # never resumed before slurmctld hears from it again
            ok("verify", verified + ("; slurmd registered" if known else ""))
            if known and self.node_reason(node_name) in (ours, ""):
                self.resume(node_name)
                ok("resume", "resumed in Slurm")
            return done, None
        except (StepFailed, CorralError) as exc:
            step = exc.step if isinstance(exc, StepFailed) else "remote command"
            keep = exc.keep_drained if isinstance(exc, StepFailed) else touched
            message = str(exc).replace("\n", " ")
            if keep and touched and step in ("reboot", "verify"):  # the new driver does not work
                done.append(OpResult(name=f"driver rollout | {step}", status="failed", reason=message,
                                     disruption=REBOOT))
                self.say(f"node {node_name}: driver rollout: {step} FAILED: {message}")
                rolled, text = driver_rollback.attempt(self, node_name, packages, previous, known, ours, done)
                if not rolled:
                    after, note = settle(self, node_name, known, True, ours,
                                         f"corral: driver {driver.version} {step} failed: {message}")
                    text = f"{text}; {after}{note}"
                return done, f"driver rollout: {step} failed: {message} ({text})"
            after, note = settle(self, node_name, known, keep, ours,
                                 f"corral: driver {driver.version} {step} failed: {message}")
            message += note
            done.append(OpResult(name=f"driver rollout | {step}", status="failed", reason=f"{message} ({after})",
                                 disruption=REBOOT))
            self.say(f"node {node_name}: driver rollout: {step} FAILED: {message} ({after})")
            return done, f"driver rollout: {step} failed: {message} ({after})"


WHAT = "driver rollout"


def roll_out(cluster: Cluster, result: RunResult, nodes: list[str], say: Callable[[str], None] | None = None) -> bool:
    """Carry out the pending reboots in the policy's batches; results go into `result`. False when
    the rollout stopped early (workflows/batches.py)."""
    r = Rollout(cluster, say)

    def do_batch(batch: list[str]) -> list[str]:
        failed = []
        for name, (ops, error) in zip(batch, pmap(r.one, batch)):
            n = result.nodes[name]
            n.ops.extend(ops)
            if error:
                n.error, n.error_kind = error, "op-failed"
                failed.append(name)
        return failed
    return batches.run_batches(WHAT, nodes, r.r, do_batch, result, say, disruption=REBOOT)
