"""Automatic rollback of a driver rollout (`rollout.rollback`, on by default): a node that does not
come back or fails verification on the new driver is put back on the version it ran before: the
previous version pinned and installed again, rebooted into, verified, resumed. The node still counts
as failed for the rollout policy (the run says "rolled back" with the failure).

No rollback, and the node stays drained with the failure as its reason, when: the policy says so,
no driver package was installed before (a first install), the previous version is the new one
(a reboot into an installed driver).
"""

from __future__ import annotations

from corral.deploy.nvidia_driver import REBOOT
from corral.engine.results import OpResult
from corral.engine.shell import q
from corral.errors import CorralError
from corral.facts.slurm import upstream_version
from corral.workflows.slurm_node import StepFailed


def previous_version(r, node_name: str, package: str) -> str | None:
    """The upstream version of the installed driver package, None if none."""
    p = r.on(node_name, f"dpkg-query -W -f {q('${Version}')} {q(package)} 2>/dev/null")
    text = p.stdout.strip() if p.returncode == 0 else ""
    return upstream_version(text) if text else None


def why_not(r, previous: str | None) -> str | None:
    target = r.cluster.spec.nvidia.driver.version
    if not r.r.rollback:
        return "no rollback (rollout.rollback is false)"
    if previous is None:
        return "no rollback: no driver package was installed before"
    if previous == target:
        return f"no rollback: {target} was already installed before this rollout"
    return None


def _op(step: str, status: str, reason: str) -> OpResult:
    return OpResult(name=f"driver rollout | rollback{' ' + step if step else ''}", status=status, reason=reason,
                    disruption=REBOOT)


def attempt(r, node_name: str, packages: list[str], previous: str | None, known: bool | None,
            ours: str, done: list[OpResult]) -> tuple[bool, str]:
    """(True, what was done) when the node runs `previous` again, verified; else (False, why not)."""
    why = why_not(r, previous)
    if why:
        done.append(_op("", "skipped", why))
        return False, why
    node = r.cluster.node(node_name)
    step = "install"

    def ok(reason: str) -> None:
        done.append(_op(step, "changed", reason))
        r.say(f"node {node_name}: driver rollout: rollback {step}: {reason}")
    try:
        r.install(node_name, packages, previous)
        ok(f"{', '.join(packages)} {previous} installed and pinned again")
        step = "reboot"
        r.reboot(node_name)
        ok("rebooted; SSH and slurmd back")
        step = "verify"
        verified = r.verify(node_name, previous, node.gpu_count, len(packages) > 1)
        if known:
            r.registered(node_name)
        ok(verified + ("; slurmd registered" if known else ""))
        if known and r.node_reason(node_name) in (ours, ""):
            step = "resume"
            r.resume(node_name)
            ok("resumed in Slurm")
            return True, f"rolled back to {previous}, verified and resumed"
        return True, f"rolled back to {previous} and verified"
    except (StepFailed, CorralError) as exc:
        text = f"rollback to {previous} failed at {step}: {' '.join(str(exc).split())}"
        done.append(_op(step, "failed", text))
        r.say(f"node {node_name}: driver rollout: rollback {step} FAILED: {text}")
        return False, text
