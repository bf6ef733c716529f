"""A node taken out of the spec (in corral's record, engine/node_record.py, no longer in the spec): the
steps on one such node. workflows/removal_phase.py runs them around the components' run.

  plan:   one op, "remove node" [drain + remove from Slurm], with its running jobs when slurmctld
          answers ([stop services] for a node Slurm does not know); nothing is changed.
  before: drain (reason `corral: removing`) -> --force: `scancel -w NODE` -> wait for its jobs, bounded
          by drain_timeout_s() (`rollout.drain_timeout`). This comes before any component: a restart of
          slurmctld with a slurm.conf that lost a node kills that node's jobs.
  (the components: slurm.conf without the node; a node-set change restarts slurmctld, then reconfigure)
  after:  Slurm no longer knows it (scontrol: `Node X not found`) -> on the node, corral's daemons for
          its roles (the components' `stops`) stopped and disabled. Its data, packages, users, mounts and host key stay.

Slurm calls are workflows/slurm_node.py's; `run(node, command, timeout)` is the seam (SSH by default,
the removed node reached at its recorded address with the spec's SSH settings).
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from dataclasses import replace

from corral.components.slurm import COMPONENTS
from corral.components.views import stopped_units
from corral.engine.node_record import DRAINED, SERVICES_LEFT, Deployed
from corral.engine.remote import run_on
from corral.engine.results import OpResult, TimedSteps
from corral.engine.shell import q
from corral.errors import CorralError
from corral.spec.cluster import Cluster
from corral.spec.rules_rollout import policy
from corral.workflows.node_control import Run
from corral.workflows.slurm_node import SlurmNode, StepFailed, _why

REASON = "corral: removing"
DISRUPTION = "drain + remove from Slurm"
STOP_ONLY = "stop services"
STOP_TIMEOUT = 120


def drain_timeout_s(cluster: Cluster) -> int:
    """How long apply waits for a removed node's jobs: the one place that says where the timeout is
    (`rollout.drain_timeout`, or an older spec's nvidia.rollout.drain_timeout_s: spec/rules_rollout.py)."""
    return policy(cluster.spec).drain_timeout


def units_of(roles) -> list[str]:
    """The daemons corral starts on a node of `roles` (the components' `stops`), slurmd before munge."""
    return stopped_units(COMPONENTS, roles)


def stop_script(units: list[str]) -> str:
    """Stop and disable each unit the node has (one it lacks is skipped); prints `stopped: a b`, exits 1
    naming those still active."""
    lines = ["set -u", "stopped=''; failed=''"]
    lines.append(f"for u in {' '.join(q(u) for u in units)}; do")
    lines.extend(['  systemctl cat -- "$u.service" >/dev/null 2>&1 || continue',
                  '  systemctl disable --now -- "$u.service" >/dev/null 2>&1',
                  '  systemctl reset-failed -- "$u.service" >/dev/null 2>&1',  # stopped reads inactive, not failed
                  '  if systemctl is-active --quiet -- "$u.service"; then failed="$failed $u"; '
                  'else stopped="$stopped $u"; fi',
                  "done",
                  'echo "stopped:$stopped"',
                  '[ -z "$failed" ] || { echo "still active:$failed" >&2; exit 1; }'])
    return "\n".join(lines) + "\n"


def ssh_run(cluster: Cluster, gone: list[Deployed]) -> Run:
    """run(node, command, timeout) over SSH; the removed nodes reached at their recorded addresses."""
    view = replace(cluster, nodes=[*cluster.nodes, *(d.node() for d in gone)])
    return lambda node, command, timeout: run_on(view, node, command, timeout=timeout)


def op(step: str, status: str, reason: str, disruption: str = DISRUPTION) -> OpResult:
    return OpResult(name=f"remove node | {step}" if step else "remove node", status=status, reason=reason,
                    disruption=disruption)


class Removal(SlurmNode):
    def __init__(self, cluster: Cluster, gone: list[Deployed], *, run: Run | None = None, force: bool = False,
                 say: Callable[[str], None] | None = None) -> None:
        self.cluster, self.gone, self.force = cluster, {d.name: d for d in gone}, force
        self.say = say or (lambda line: None)
        ctl = cluster.with_role("controller")
        self.controller = ctl[0].name if ctl else None
        self.r = policy(cluster.spec)  # SlurmNode.wait_for_jobs reads its drain_timeout (drain_timeout_s)
        self.run = run or ssh_run(cluster, gone)

    def sc(self, command: str, timeout: float = 30) -> subprocess.CompletedProcess:
        if self.controller is None:  # spec/rules.py refuses a Slurm cluster without one
            raise StepFailed("ask Slurm", "the spec names no Slurm controller to ask")
        return self.run(self.controller, command, timeout)

    def known(self, name: str) -> bool:
        """Whether Slurm knows the node (StepFailed when slurmctld does not answer)."""
        return self.controller is not None and self.node_reason(name) is not None

    def planned(self, name: str) -> OpResult:
        """What apply would do, with the node's running jobs; asks, changes nothing."""
        rest = "then stops its services (its data stays)"
        try:
            if not self.known(name):
                return op("", "changed", "Slurm does not know it: apply stops its services (its data stays)",
                          STOP_ONLY)
        except StepFailed as exc:
            return op("", "changed", f"running jobs unknown ({exc}); apply drains it first")
        jobs, failed = self.running_jobs(name)
        count = f"running jobs unknown ({failed})" if jobs is None else f"{len(jobs)} running job(s)"
        wait = "cancels its jobs (--force)" if self.force else f"waits up to {self.r.drain_timeout} s for its jobs"
        return op("", "changed", f"{count}: apply drains it, {wait}, takes it out of slurm.conf, {rest}")

    def _step(self, name: str, done: list[OpResult], step: str, status: str, reason: str) -> None:
        done.append(op(step, status, reason))
        self.say(f"node {name}: remove: {step}{' FAILED' if status == 'failed' else ''}: {reason}")

    def before(self, name: str) -> tuple[list[OpResult], str | None, bool]:
        """Drain, cancel (--force), wait: (the steps, the error, whether Slurm knows the node)."""
        done: list[OpResult] = TimedSteps()
        known = False
        left = "the node stays drained and in slurm.conf; nothing else was applied"
        try:
            known = self.known(name)
            if not known:
                return done, None, False
            self.drain(name, REASON)
            self._step(name, done, "drain", "changed", f"drained in Slurm ({REASON})")
            if self.force:
                p, failed = self._ask(f"scancel -w {q(name)}")
                if p is None or p.returncode != 0:
                    raise StepFailed("cancel jobs", f"scancel -w {name} failed ({failed or _why(p)}); {left}", True)
                self._step(name, done, "cancel jobs", "changed", "its jobs cancelled (--force)")
            self.say(f"node {name}: remove: waiting for its jobs (up to {self.r.drain_timeout} s)")
            self.wait_for_jobs(name, still=f"{left}: apply again when they end, or with --force to cancel them",
                               unknown=left)
            self._step(name, done, "wait for jobs", "changed", "no job running on the node")
            return done, None, True
        except StepFailed as exc:
            message = " ".join(str(exc).split())
            self._step(name, done, exc.step, "failed", message)
            return done, f"{name}: removal: {exc.step} failed: {message}", known

    def after(self, name: str, known: bool) -> tuple[list[OpResult], str | None, str | None]:
        """After the components: out of Slurm, then its services stopped. (the steps, the error, what is
        left for the record: None when the removal is finished)."""
        done: list[OpResult] = TimedSteps()
        if known:
            try:
                still = self.node_reason(name) is not None
                why = (f"Slurm still knows {name} after the apply: slurm.conf on {self.controller} was not updated "
                       f"(see its result); {name} stays drained: apply again") if still else None
            except StepFailed as exc:
                why = " ".join(str(exc).split())
            if why:
                self._step(name, done, "out of Slurm", "failed", why)
                return done, f"{name}: removal: out of Slurm failed: {why}", DRAINED
            self._step(name, done, "out of Slurm", "changed", "not in slurm.conf (slurmctld restarted, reconfigured)")
        units = units_of(self.gone[name].roles)
        try:
            p = self.run(name, stop_script(units), STOP_TIMEOUT)
            why = None if p.returncode == 0 else ("unreachable over SSH: " if p.returncode == 255 else "") + _why(p)
        except CorralError as exc:  # timed out
            why = " ".join(str(exc).split())
        if why:
            why = (f"{SERVICES_LEFT}: {why}; when it is back, apply again stops them (or, gone for good, "
                   f"`corral trust --forget {name}` forgets it)")
            self._step(name, done, "stop services", "failed", why)
            return done, f"{name}: removal: stop services failed: {why}", SERVICES_LEFT
        stopped = (p.stdout.strip().splitlines() or [""])[-1].removeprefix("stopped:").split()
        self._step(name, done, "stop services", "changed",
                   f"stopped and disabled: {', '.join(stopped) or 'none was there'}; data, packages, users left")
        return done, None, None

    def lift(self, name: str) -> list[OpResult]:
        """A node back in the spec that an unfinished removal left drained: resumed when Slurm's reason is
        still ours (a drain of the admin's own is left)."""
        try:
            if self.controller is None or self.node_reason(name) != REASON:
                return []
            self.resume(name)
        except StepFailed as exc:
            said = " ".join(str(exc).split())
            why = said if "was resumed in Slurm" in said else (
                f"{said}; it stays drained ({REASON!r}): `scontrol update nodename={name} state=resume` on "
                f"{self.controller}")
            self.say(f"node {name}: back in the spec: resume FAILED: {why}")
            return [OpResult(name="back in the spec | resume", status="failed", reason=why)]
        self.say(f"node {name}: back in the spec: resumed in Slurm")
        return [OpResult(name="back in the spec | resume", status="changed", reason=f"drain {REASON!r} lifted")]
