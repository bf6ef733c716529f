"""The package upgrade rollout, declared (`PACKAGES`) for workflows/node_rollout.py: package upgrades
(`packages.upgrade`), carried out after every other component and the driver and
MIG rollouts, in the batches of the rollout policy (workflows/batches.py). Each node:

  drain -> wait for its jobs (bounded) -> refresh apt's lists and simulate again (the versions to
  install are the spec's selection now) -> install exactly those versions -> reboot when the node asks
  (/var/run/reboot-required, or a kernel newer than the running one) -> verify (the versions
  installed, `dpkg --audit` clean, slurmd and munge active, the node's GPUs) -> resume.

A failed install or verification is rolled back (`rollout.rollback`): the old versions installed
again (`--allow-downgrades`, when the node's repositories still have them), verified, resumed; the
node counts as failed. Where they are gone, the node stays drained with the reason.
"""

from __future__ import annotations

import shlex

from corral.deploy.upgrades import UPGRADE
from corral.engine.handoff import PACKAGES as KIND
from corral.errors import CorralError
from corral.render import apt
from corral.facts.apt_upgrades import REBOOT_REQUIRED, command, parse_upgrades, select
from corral.workflows.node_rollout import DRAIN, RESUME, ROLL_BACK, NodeRollout, NodeRun, Step, StepFailed, reboot

WHAT = "package upgrade"
SETTLE_S = 60  # after a reboot: until systemd has started every unit (is-system-running --wait), bounded
SETTLE = f"timeout {SETTLE_S} systemctl is-system-running --wait >/dev/null 2>&1; true"  # slurmd back in slurmctld's view after a restart or reboot
OURS = "corral: package upgrade"
# a reboot is due: a package asked for one, or the newest kernel installed is not the running one
REBOOT_DUE = (f"test -e {REBOOT_REQUIRED} || {{ new=$(ls /boot/vmlinuz-* 2>/dev/null | sed 's|/boot/vmlinuz-||' "
              "| sort -V | tail -n 1); [ -n \"$new\" ] && [ \"$new\" != \"$(uname -r)\" ]; }")


def install_script(versions: list[tuple[str, str]], downgrade: bool = False) -> str:
    """apt-get update, then exactly these name=version (the old ones back with `downgrade`)."""
    return (f"set -u; apt-get update -q >/dev/null 2>&1 || {{ echo 'apt-get update failed' >&2; exit 1; }}; "
            f"dpkg --configure -a >/dev/null 2>&1; "
            f"{apt.install_script([f'{n}={v}' for n, v in versions], downgrade=downgrade, confold=True)}")


def installed_check(versions: list[tuple[str, str]]) -> str:
    """Prints each package whose installed version is not the wanted one; nothing when all are."""
    return "; ".join(f"[ \"$(dpkg-query -W -f '${{Version}}' {shlex.quote(n)} 2>/dev/null)\" = {shlex.quote(v)} ] "
                     f"|| echo {shlex.quote(n)}" for n, v in versions)


def verify(n: NodeRun, versions: list[tuple[str, str]]) -> str:
    """The versions installed, dpkg clean, slurmd and munge active and registered, the node's GPUs."""
    p = n.on(installed_check(versions), timeout=60)
    if p.returncode != 0 or p.stdout.split():
        raise StepFailed("verify", f"not at the planned version: {', '.join(p.stdout.split()[:8]) or p.stderr.strip()[-200:]}",
                         keep_drained=True)
    audit = n.on("dpkg --audit", timeout=60).stdout.strip()
    if audit:
        raise StepFailed("verify", f"dpkg --audit: {' '.join(audit.split())[:200]}", keep_drained=True)
    p = n.on("systemctl is-active slurmd munge", timeout=30)
    if p.returncode != 0:
        raise StepFailed("verify", f"slurmd/munge not active after the upgrade ({' '.join(p.stdout.split())})",
                         keep_drained=True)
    n.control.registered(n.name)
    gpus = n.node.gpu_count
    if gpus:
        p = n.on("nvidia-smi -L", timeout=60)
        seen = sum(1 for line in p.stdout.splitlines() if line.startswith("GPU "))
        if p.returncode != 0 or seen != gpus:
            raise StepFailed("verify", f"nvidia-smi: {seen} GPUs (rc={p.returncode}), expected {gpus}",
                             keep_drained=True)
    return f"{len(versions)} package(s) at the planned versions; dpkg clean; slurmd, munge" + (
        f"; {gpus} GPUs" if gpus else "")


def simulate(n: NodeRun) -> None:
    """With the node drained: apt's lists refreshed and the upgrade simulated again (the spec's selection)."""
    n.state.todo = select(parse_upgrades(n.on(command(), timeout=300).stdout.splitlines()),
                          n.cluster.spec.packages.upgrade)


def upgrade(n: NodeRun) -> str:
    todo = n.state.todo
    if not todo:
        return "nothing to upgrade any more"
    p = n.on(install_script([(u.name, u.new) for u in todo]), timeout=1800)
    if p.returncode != 0:
        raise StepFailed("upgrade", f"rc={p.returncode}: {(p.stderr or p.stdout).strip()[-300:]}", keep_drained=True)
    return ", ".join(f"{u.name} {u.old or 'new'} -> {u.new}" for u in todo)[:500]


def reboot_if_asked(n: NodeRun) -> str | None:
    if not n.state.todo or n.on(REBOOT_DUE, timeout=30).returncode != 0:
        return None
    reboot(n)
    n.on(SETTLE, timeout=SETTLE_S + 15)  # every unit started (or failed) before the verdict
    return "the node asked for a reboot; SSH and slurmd back"


def rollback(n: NodeRun) -> tuple[bool, str]:
    """The old versions installed again (--allow-downgrades), a reboot if asked, verified, resumed."""
    old = [(u.name, u.old) for u in n.state.todo if u.old]
    if not n.policy.rollback:
        n.op("rollback", "skipped", "rollout.rollback is false")
        return False, "no rollback (rollout.rollback is false)"
    step = "install"
    try:
        p = n.on(install_script(old, downgrade=True), timeout=1800)
        if p.returncode != 0:
            raise StepFailed("install", f"the old versions are not installable (no longer in the node's "
                             f"repositories?): {(p.stderr or p.stdout).strip()[-200:]}", keep_drained=True)
        n.op("rollback install", "changed", ", ".join(f"{name} {v}" for name, v in old)[:500])
        if n.on(REBOOT_DUE, timeout=30).returncode == 0:
            step = "reboot"
            reboot(n)
        step = "verify"
        n.op("rollback verify", "changed", verify(n, old))
        step = "resume"
        if n.known and n.control.put_back(n.name, OURS):
            n.op("rollback resume", "changed", "resumed in Slurm")
            return True, "rolled back to the old versions, verified and resumed"
        return True, "rolled back to the old versions and verified"
    except (StepFailed, CorralError) as exc:
        text = f"rollback failed at {step}: {' '.join(str(exc).split())}"
        n.op(f"rollback {step}", "failed", text)
        return False, text


PACKAGES = NodeRollout(
    kind=KIND, what=WHAT, disruption=UPGRADE,
    steps=(DRAIN, Step("simulate", simulate), Step("upgrade", upgrade, changes=True), Step("reboot", reboot_if_asked),
           Step("verify", lambda n: verify(n, [(u.name, u.new) for u in n.state.todo]) if n.state.todo else None),
           RESUME),
    reason=lambda c: OURS, blame=lambda c: OURS, on_failure=ROLL_BACK,
    roll_back_at=frozenset({"upgrade", "reboot", "verify"}), rollback=rollback)
