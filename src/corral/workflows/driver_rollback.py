"""Automatic rollback of a driver rollout (`rollout.rollback`, on by default): a node that does not
come back or fails verification on the new driver is put back on the version it ran before: the
previous version pinned and installed again, rebooted into, verified, resumed. The node still counts
as failed for the rollout policy (the run says "rolled back" with the failure).

No rollback, and the node stays drained with the failure as its reason, when: the policy says so,
no driver package was installed before (a first install), the previous version is the new one
(a reboot into an installed driver).
"""

from __future__ import annotations

from corral.engine.shell import q
from corral.errors import CorralError
from corral.facts.slurm import upstream_version
from corral.workflows.node_control import StepFailed


def previous_version(n, package: str) -> str | None:
    """The upstream version of the installed driver package, None if none."""
    p = n.on(f"dpkg-query -W -f {q('${Version}')} {q(package)} 2>/dev/null")
    text = p.stdout.strip() if p.returncode == 0 else ""
    return upstream_version(text) if text else None


def why_not(n, previous: str | None) -> str | None:
    target = n.cluster.spec.nvidia.driver.version
    if not n.policy.rollback:
        return "no rollback (rollout.rollback is false)"
    if previous is None:
        return "no rollback: no driver package was installed before"
    if previous == target:
        return f"no rollback: {target} was already installed before this rollout"
    return None


def attempt(n) -> tuple[bool, str]:
    """The node (a workflows/node_rollout.py NodeRun of the driver rollout) back on the version it
    ran before: (True, what was done) when it runs it again, verified; else (False, why not)."""
    from corral.workflows.driver_rollout import install, reboot, verify
    previous = n.state.previous
    why = why_not(n, previous)
    if why:
        n.op("rollback", "skipped", why)
        return False, why
    step = "install"
    try:
        n.ok("rollback install", install(n, previous).replace("installed and pinned", "installed and pinned again"))
        step = "reboot"
        n.ok("rollback reboot", reboot(n))
        step = "verify"
        n.ok("rollback verify", verify(n, previous))
        step = "resume"
        if n.known and n.control.put_back(n.name, n.rollout.decl.reason(n.cluster)):
            n.ok("rollback resume", "resumed in Slurm")
            return True, f"rolled back to {previous}, verified and resumed"
        return True, f"rolled back to {previous} and verified"
    except (StepFailed, CorralError) as exc:
        text = f"rollback to {previous} failed at {step}: {' '.join(str(exc).split())}"
        n.op(f"rollback {step}", "failed", text)
        n.rollout.say(f"node {n.name}: driver rollout: rollback {step} FAILED: {text}")
        return False, text
