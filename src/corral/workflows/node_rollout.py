"""The one node-rollout state machine. A rollout is a declaration (`NodeRollout`): the steps each node
goes through, what a failure leaves (its policy), how its nodes are picked (`pending`: the typed
hand-off the deploy op left on its result, engine/handoff.py), and what the plan shows. This module
carries any of them out, in the batches of the rollout policy (workflows/batches.py):

  prepare -> [steps, DRAIN and RESUME among them where the rollout wants them] -> done

DRAIN takes the node out of service through its scheduler's NodeControl (Slurm: drain, wait for
the jobs; Kubernetes: cordon and drain) when the scheduler runs work there; RESUME puts it back when
it is still out for our reason. A failure (StepFailed, or a command that could not be run) ends the
node's rollout; the policy decides what the node is left as:

  KEEP_DRAINED  once a step that `changes` the node began, it stays out of service with the failure
                as its reason; before that, it goes back as it was
  RESTORE       each failure says (StepFailed.keep_drained) whether the node may go back
  ROLL_BACK     as RESTORE, and a failure at a `roll_back_at` step runs the rollback first (the node
                still counts as failed for the policy)

Every step is an OpResult named "<what> | <step>" on the node's result. Commands go through one
`run(node, command, timeout)` callable and waits through one clock (workflows/node_control.py),
both passed in.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from types import SimpleNamespace

from corral import paths
from corral.engine.results import OpResult, RunResult, TimedSteps
from corral.engine.run_context import NOT_IN_ROLLOUT
from corral.errors import CorralError, NodeError
from corral.parallel import pmap
from corral.spec.cluster import Cluster
from corral.spec.rules_rollout import policy as rollout_policy
from corral.workflows import batches
from corral.workflows.node_control import SYSTEM, Clock, NodeControl, Run, StepFailed, checked, intervals, ssh

KEEP_DRAINED, RESTORE, ROLL_BACK = "keep drained", "restore", "roll back"
MARKER = paths.REBOOT_MARKER  # in /run (a tmpfs): gone once the node has rebooted
# `systemctl reboot` a second from now, once the SSH command that asked for it has returned. The timer's
# accuracy is set: a transient timer's default AccuracySec (1 min) let systemd fire it anywhere up to a
# minute late (measured: 1-16 s after the 1 s asked), and every rollout waited that out
REBOOT_SOON = "systemd-run --on-active=1 --timer-property=AccuracySec=100ms systemctl reboot"
REBOOT_POLL_S = 1.0


def _through_control(n: "NodeRun") -> str | None:
    """DRAIN's and RESUME's run: never called, the rollout does those through the node's NodeControl."""
    raise TypeError("a step other than DRAIN and RESUME needs its run")


@dataclass(frozen=True)
class Step:
    """One step: `run(node)` does it (raising StepFailed) and returns what it did, recorded as the
    step's OpResult (None: nothing recorded). `changes`: from here on the node may differ."""
    name: str
    run: Callable[["NodeRun"], str | None] = _through_control
    changes: bool = False


DRAIN, RESUME = Step("drain"), Step("resume")


@dataclass(frozen=True)
class NodeRollout:
    kind: str                                  # the hand-off it carries out (engine/handoff.py)
    what: str                                  # "driver rollout": every step's name starts with it
    disruption: str                            # the label on its steps (the deploy's, for display)
    steps: tuple[Step, ...]
    reason: Callable[[Cluster], str]           # the drain reason that marks the node as ours
    blame: Callable[[Cluster], str]            # a failure's reason starts with it ("corral: MIG")
    on_failure: str = RESTORE
    roll_back_at: frozenset[str] = frozenset()
    rollback: Callable[["NodeRun"], tuple[bool, str]] | None = None
    prepare: Callable[["NodeRun"], None] | None = None  # before anything changes (facts the steps need)
    whole_cluster: str = ""                    # why it changes more than its nodes (not run with --rollout-only)
    start: Callable | None = None              # (rollout, result, nodes, env) -> bool; default: batches
    plan: Callable | None = None               # (cluster, result, nodes, policy) -> dict | None


def pending(result: RunResult, kind: str) -> list[str]:
    """The nodes (in the result's order) an op of this run handed to the rollout of `kind`."""
    return [name for name, n in result.nodes.items()
            if n.ok and any(o.status == "changed" and o.rollout is not None and o.rollout.kind == kind
                            for o in n.ops)]


def held_back(result: RunResult) -> dict[str, list[str]]:
    """`apply --rollout-only`: op name -> the nodes (in the result's order) where it left a change for a
    rollout alone because the node was not chosen (its reason says NOT_IN_ROLLOUT, deploy/mig.py)."""
    out: dict[str, list[str]] = {}
    for name, n in result.nodes.items():
        for o in n.ops:
            if o.status != "failed" and NOT_IN_ROLLOUT in (o.reason or ""):
                out.setdefault(o.name, []).append(name)
    return out


def handoffs(result: RunResult, kind: str, nodes: list[str]) -> list:
    """The hand-offs of `kind` on `nodes` (their from/to versions)."""
    return [o.rollout for n in nodes for o in result.nodes[n].ops
            if o.rollout is not None and o.rollout.kind == kind]


@dataclass
class Env:
    """What converge passes to every rollout: the run seam, the clock, the progress line, and what
    some rollouts need of the command (`backup`: the Slurm upgrade; `follow`: the MIG rollout)."""
    run: Run | None = None
    clock: Clock = SYSTEM
    say: Callable[[str], None] = lambda line: None
    backup: Callable | None = None
    follow: Callable | None = None


class NodeRun:
    """One node's pass through a rollout: what its steps get. `state`: what a step keeps for the
    later ones (and the rollback)."""

    def __init__(self, rollout: "Rollout", name: str) -> None:
        self.rollout, self.name, self.cluster = rollout, name, rollout.cluster
        self.control, self.policy, self.clock = rollout.control, rollout.policy, rollout.clock
        self.done: list[OpResult] = TimedSteps()
        self.known: bool | None = None
        self.state: SimpleNamespace = SimpleNamespace()

    @property
    def node(self):
        return self.cluster.node(self.name)

    def on(self, command: str, timeout: float = 60, check: bool = False, node: str | None = None):
        run = self.rollout.run
        return checked(run, node or self.name, command, timeout) if check else run(node or self.name, command, timeout)

    def op(self, step: str, status: str, reason: str) -> None:
        self.done.append(OpResult(name=f"{self.rollout.decl.what} | {step}", status=status, reason=reason,
                                  disruption=self.rollout.decl.disruption))

    def ok(self, step: str, reason: str) -> None:
        self.op(step, "changed", reason)
        self.rollout.say(f"node {self.name}: {self.rollout.decl.what}: {step}: {reason}")


class Rollout:
    """A declaration carried out on a cluster: `one(name)` for a node, `batches()` for the policy."""

    def __init__(self, decl: NodeRollout, cluster: Cluster, env: Env | None = None,
                 control: NodeControl | None = None) -> None:
        env = env or Env()
        self.decl, self.cluster, self.say, self.clock = decl, cluster, env.say, env.clock
        self.run, self.env = env.run or ssh(cluster), env
        self.policy = rollout_policy(cluster.spec)
        self.control: NodeControl = control or self._control()

    def _control(self) -> NodeControl:
        """The cluster's scheduler's NodeControl (workflows/flows.py `control`)."""
        from corral.workflows import flows
        return flows.of(self.cluster).control(self.cluster, self.run, self.policy, self.clock)

    def one(self, name: str) -> tuple[list[OpResult], str | None]:
        """The node through the declaration's steps: (its step results, its error or None)."""
        d, n, c = self.decl, NodeRun(self, name), self.control
        ours, touched = d.reason(self.cluster), False
        try:
            if d.prepare:
                d.prepare(n)
            n.known = c.known(name)
            for step in d.steps:
                if step is DRAIN:
                    if n.known:
                        c.take_out(name, ours, n.ok)
                elif step is RESUME:
                    done = c.put_back(name, ours) if n.known else None
                    if done:
                        n.ok(c.resume_step, done)
                else:
                    touched = touched or step.changes
                    done = step.run(n)
                    if done:
                        n.ok(step.name, done)
            return n.done, None
        except (StepFailed, CorralError) as exc:
            return n.done, self._failed(n, exc, touched, ours)

    def _failed(self, n: NodeRun, exc: Exception, touched: bool, ours: str) -> str:
        d, name = self.decl, n.name
        step = exc.step if isinstance(exc, StepFailed) else "remote command"
        if d.on_failure == KEEP_DRAINED or not isinstance(exc, StepFailed):
            keep = touched
        else:
            keep = exc.keep_drained
        message = " ".join(str(exc).split())
        failed = f"{d.blame(self.cluster)} {step} failed: {message}"
        rollback = d.rollback if d.on_failure == ROLL_BACK else None
        if rollback is not None and keep and touched and step in d.roll_back_at:
            n.op(step, "failed", message)
            self.say(f"node {name}: {d.what}: {step} FAILED: {message}")
            rolled, text = rollback(n)
            if not rolled:
                after, note = self.control.settle(name, n.known, True, ours, failed)
                text = f"{text}; {after}{note}"
            return f"{d.what}: {step} failed: {message} ({text})"
        after, note = self.control.settle(name, n.known, keep, ours, failed)
        reason = f"{message}{note}" + (f" ({after})" if after else "")
        n.op(step, "failed", reason)
        self.say(f"node {name}: {d.what}: {step} FAILED: {reason}")
        return f"{d.what}: {step} failed: {reason}"

    def record(self, result: RunResult, name: str, ops: list[OpResult], error: str | None) -> bool:
        node = result.nodes[name]
        node.ops.extend(ops)
        if error:
            node.error, node.error_kind = error, "op-failed"
        return error is None

    def batches(self, result: RunResult, nodes: list[str],
                after: Callable[[list[str]], list[str]] | None = None) -> bool:
        """The nodes in the policy's batches, each batch's in parallel; `after(ready)`: what the
        rollout does with a batch's nodes that went through (the nodes that then failed)."""
        def do_batch(batch: list[str]) -> list[str]:
            ready = [name for name, r in zip(batch, pmap(self.one, batch)) if self.record(result, name, *r)]
            failed = [name for name in batch if name not in ready]
            return failed + (after(ready) if after and ready else [])
        return batches.run_batches(self.decl.what, nodes, self.policy, do_batch, result, self.say,
                                   disruption=self.decl.disruption, clock=self.clock)


def roll_out(decl: NodeRollout, cluster: Cluster, result: RunResult, nodes: list[str], env: Env | None = None,
             control: NodeControl | None = None) -> bool:
    """Carry `decl` out on `nodes`; results go into `result`. False when it stopped early."""
    r = Rollout(decl, cluster, env, control)
    return decl.start(r, result, nodes) if decl.start else r.batches(result, nodes)


def planned(decl: NodeRollout, cluster: Cluster, result: RunResult, nodes: list[str]) -> dict | None:
    """plan: the batches (or the rollout's own order) it would go through."""
    p = rollout_policy(cluster.spec)
    return decl.plan(cluster, result, nodes, p) if decl.plan else batches.planned(decl.what, nodes, p)


def reboot(n: NodeRun) -> str:
    """Reboot, then until SSH answers with the marker in /run gone and slurmd running."""
    n.on(f"touch {MARKER} && {REBOOT_SOON} >/dev/null", check=True)
    # asked every second at most (a node that is down makes each ask wait for SSH's connect timeout anyway);
    # the marker tells an ask before the reboot from one after it
    deadline, waits = n.clock.monotonic() + n.policy.reboot_timeout, intervals(most=REBOOT_POLL_S)
    while n.clock.monotonic() < deadline:
        n.clock.sleep(next(waits))
        try:
            if n.on(f"test ! -e {MARKER} && systemctl is-active slurmd", timeout=15).returncode == 0:
                return "rebooted; SSH and slurmd back"
        except NodeError:
            continue  # not answering yet
    raise StepFailed("reboot", f"no answer with slurmd running within {n.policy.reboot_timeout} s after the reboot",
                     keep_drained=True)
