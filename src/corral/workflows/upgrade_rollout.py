"""Package upgrades (`packages.upgrade`), carried out after every other component and the driver and
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
from collections.abc import Callable

from corral.deploy.upgrades import UPGRADE
from corral.engine.results import OpResult, TimedSteps, RunResult
from corral.errors import CorralError
from corral.facts.apt_upgrades import REBOOT_REQUIRED, Upgrade, command, parse_upgrades, select
from corral.parallel import pmap
from corral.spec.cluster import Cluster
from corral.workflows import batches
from corral.workflows.rollout import Rollout
from corral.workflows.slurm_node import StepFailed, settle

WHAT = "package upgrade"
SETTLE_S = 60  # after a reboot: until systemd has started every unit (is-system-running --wait), bounded
SETTLE = f"timeout {SETTLE_S} systemctl is-system-running --wait >/dev/null 2>&1; true"  # slurmd back in slurmctld's view after a restart or reboot
OURS = "corral: package upgrade"
APT = "DEBIAN_FRONTEND=noninteractive apt-get -y -q -o Dpkg::Options::=--force-confold"
# a reboot is due: a package asked for one, or the newest kernel installed is not the running one
REBOOT_DUE = (f"test -e {REBOOT_REQUIRED} || {{ new=$(ls /boot/vmlinuz-* 2>/dev/null | sed 's|/boot/vmlinuz-||' "
              "| sort -V | tail -n 1); [ -n \"$new\" ] && [ \"$new\" != \"$(uname -r)\" ]; }")


def pending(result: RunResult) -> list[str]:
    return [name for name, n in result.nodes.items()
            if n.ok and any(o.status == "changed" and o.disruption == UPGRADE for o in n.ops)]


def install_script(versions: list[tuple[str, str]], downgrade: bool = False) -> str:
    """apt-get update, then exactly these name=version (the old ones back with `downgrade`)."""
    flag = " --allow-downgrades" if downgrade else ""
    return (f"set -u; apt-get update -q >/dev/null 2>&1 || {{ echo 'apt-get update failed' >&2; exit 1; }}; "
            f"dpkg --configure -a >/dev/null 2>&1; {APT}{flag} install "  # shell-ok: a constant flag
            f"{' '.join(shlex.quote(f'{n}={v}') for n, v in versions)}")


def installed_check(versions: list[tuple[str, str]]) -> str:
    """Prints each package whose installed version is not the wanted one; nothing when all are."""
    return "; ".join(f"[ \"$(dpkg-query -W -f '${{Version}}' {shlex.quote(n)} 2>/dev/null)\" = {shlex.quote(v)} ] "
                     f"|| echo {shlex.quote(n)}" for n, v in versions)


class Upgrades:
    def __init__(self, r: Rollout) -> None:
        self.r, self.kind = r, r.cluster.spec.packages.upgrade

    def verify(self, node: str, versions: list[tuple[str, str]]) -> str:
        p = self.r.on(node, installed_check(versions), timeout=60)
        if p.returncode != 0 or p.stdout.split():
            raise StepFailed("verify", f"not at the planned version: {', '.join(p.stdout.split()[:8]) or p.stderr.strip()[-200:]}",
                             keep_drained=True)
        audit = self.r.on(node, "dpkg --audit", timeout=60).stdout.strip()
        if audit:
            raise StepFailed("verify", f"dpkg --audit: {' '.join(audit.split())[:200]}", keep_drained=True)
        p = self.r.on(node, "systemctl is-active slurmd munge", timeout=30)
        if p.returncode != 0:
            raise StepFailed("verify", f"slurmd/munge not active after the upgrade ({' '.join(p.stdout.split())})",
                             keep_drained=True)
        self.r.registered(node)
        gpus = self.r.cluster.node(node).gpu_count
        if gpus:
            p = self.r.on(node, "nvidia-smi -L", timeout=60)
            seen = sum(1 for line in p.stdout.splitlines() if line.startswith("GPU "))
            if p.returncode != 0 or seen != gpus:
                raise StepFailed("verify", f"nvidia-smi: {seen} GPUs (rc={p.returncode}), expected {gpus}",
                                 keep_drained=True)
        return f"{len(versions)} package(s) at the planned versions; dpkg clean; slurmd, munge" + (
            f"; {gpus} GPUs" if gpus else "")

    def one(self, name: str) -> tuple[list[OpResult], str | None]:
        done: list[OpResult] = TimedSteps()
        r, known, todo = self.r, None, []

        def ok(step: str, reason: str) -> None:
            done.append(OpResult(name=f"{WHAT} | {step}", status="changed", reason=reason, disruption=UPGRADE))
            r.say(f"node {name}: {WHAT}: {step}: {reason}")
        try:
            known = r.controller is not None and r.node_reason(name) is not None
            if known:
                r.drain_and_wait(name, OURS, ok)
            todo = select(parse_upgrades(r.on(name, command(), timeout=300).stdout.splitlines()), self.kind)
            if not todo:
                ok("upgrade", "nothing to upgrade any more")
            else:
                p = r.on(name, install_script([(u.name, u.new) for u in todo]), timeout=1800)
                if p.returncode != 0:
                    raise StepFailed("upgrade", f"rc={p.returncode}: {(p.stderr or p.stdout).strip()[-300:]}",
                                     keep_drained=True)
                ok("upgrade", ", ".join(f"{u.name} {u.old or 'new'} -> {u.new}" for u in todo)[:500])
                if r.on(name, REBOOT_DUE, timeout=30).returncode == 0:
                    r.reboot(name)
                    r.on(name, SETTLE, timeout=SETTLE_S + 15)  # every unit started (or failed) before the verdict
                    ok("reboot", "the node asked for a reboot; SSH and slurmd back")
                ok("verify", self.verify(name, [(u.name, u.new) for u in todo]))
            if known and r.node_reason(name) in (OURS, ""):
                r.resume(name)
                ok("resume", "resumed in Slurm")
            return done, None
        except (StepFailed, CorralError) as exc:
            step = exc.step if isinstance(exc, StepFailed) else "remote command"
            keep = exc.keep_drained if isinstance(exc, StepFailed) else bool(todo)
            message = " ".join(str(exc).split())
            if step in ("upgrade", "reboot", "verify") and todo:
                done.append(OpResult(name=f"{WHAT} | {step}", status="failed", reason=message, disruption=UPGRADE))
                r.say(f"node {name}: {WHAT}: {step} FAILED: {message}")
                rolled, text = self.rollback(name, todo, known, done)
                if not rolled:
                    after, note = settle(r, name, known, True, OURS, f"{OURS} {step} failed: {message}")
                    text = f"{text}; {after}{note}"
                return done, f"{WHAT}: {step} failed: {message} ({text})"
            after, note = settle(r, name, known, keep, OURS, f"{OURS} {step} failed: {message}")
            done.append(OpResult(name=f"{WHAT} | {step}", status="failed", reason=f"{message}{note} ({after})",
                                 disruption=UPGRADE))
            return done, f"{WHAT}: {step} failed: {message}{note} ({after})"

    def rollback(self, name: str, todo: list[Upgrade], known: bool | None, done: list[OpResult]) -> tuple[bool, str]:
        r, old = self.r, [(u.name, u.old) for u in todo if u.old]
        if not r.r.rollback:
            done.append(OpResult(name=f"{WHAT} | rollback", status="skipped", reason="rollout.rollback is false"))
            return False, "no rollback (rollout.rollback is false)"
        step = "install"
        try:
            p = r.on(name, install_script(old, downgrade=True), timeout=1800)
            if p.returncode != 0:
                raise StepFailed("install", f"the old versions are not installable (no longer in the node's "
                                 f"repositories?): {(p.stderr or p.stdout).strip()[-200:]}", keep_drained=True)
            done.append(OpResult(name=f"{WHAT} | rollback install", status="changed", disruption=UPGRADE,
                                 reason=", ".join(f"{n} {v}" for n, v in old)[:500]))
            if r.on(name, REBOOT_DUE, timeout=30).returncode == 0:
                step = "reboot"
                r.reboot(name)
            step = "verify"
            done.append(OpResult(name=f"{WHAT} | rollback verify", status="changed", disruption=UPGRADE,
                                 reason=self.verify(name, old)))
            if known and r.node_reason(name) in (OURS, ""):
                step = "resume"
                r.resume(name)
                done.append(OpResult(name=f"{WHAT} | rollback resume", status="changed", reason="resumed in Slurm",
                                     disruption=UPGRADE))
                return True, "rolled back to the old versions, verified and resumed"
            return True, "rolled back to the old versions and verified"
        except (StepFailed, CorralError) as exc:
            text = f"rollback failed at {step}: {' '.join(str(exc).split())}"
            done.append(OpResult(name=f"{WHAT} | rollback {step}", status="failed", reason=text, disruption=UPGRADE))
            return False, text


def roll_out(cluster: Cluster, result: RunResult, nodes: list[str], say: Callable[[str], None] | None = None) -> bool:
    up = Upgrades(Rollout(cluster, say))

    def do_batch(batch: list[str]) -> list[str]:
        failed = []
        for name, (ops, error) in zip(batch, pmap(up.one, batch)):
            result.nodes[name].ops.extend(ops)
            if error:
                result.nodes[name].error, result.nodes[name].error_kind = error, "op-failed"
                failed.append(name)
        return failed
    return batches.run_batches(WHAT, nodes, up.r.r, do_batch, result, say, disruption=UPGRADE)
