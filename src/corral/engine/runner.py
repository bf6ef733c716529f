"""run(cluster, deploys, mode=plan|apply): connect, prepare, plan or apply, collect, journal.

Deploys are pyinfra `@deploy` functions taking no arguments; they read `host.data.corral_node`.
The State is made with check_for_changes=False so preparing is instant and touches no node; plan
then runs each op's command generator per node, in parallel, and apply executes.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime, timezone

from pyinfra.api import Config, State

from corral.engine import execute, journal, notes, pyinfra_seam as seam, run_context, timing
from corral.engine.capture import Capture, capturing
from corral.engine.connect import connect
from corral.engine.inventory import build_inventory, local_inventory, select_nodes
from corral.engine.progress import Event, EventSink, PyinfraEvents, _quiet
from corral.engine.results import NodeResult, OpResult, RunResult
from corral.errors import CorralError, UsageError
from corral.spec.cluster import Cluster

MODES = ("plan", "apply")
CONNECT_TIMEOUT = 10


def _show(command) -> str:
    """A command as a person reads it (uploads by destination; their content is never shown)."""
    dest = getattr(command, "dest", None)
    if dest is not None and hasattr(command, "src"):
        return f"upload {dest}"
    return str(command)


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


class Run:
    """Book-keeping of one run: op names per node, results, events, captured pyinfra output."""

    def __init__(self, state: State, cluster: Cluster, capture: Capture, sink: EventSink,
                 mode: str, result: RunResult) -> None:
        self.state, self.cluster, self.capture, self.sink, self.mode = state, cluster, capture, sink, mode
        self.result = result
        self.names: dict[tuple[str, str], str] = {}
        self.phases: dict[str, list[list[str]]] = {}  # node -> per deploy, the op hashes it added
        self.deploy_names: list[str] = []  # the deploys in order (index = position in phases[node])
        self.waits: list[tuple[int, ...] | None] = []  # per deploy: the earlier ones it waits for (None: all)

    def timed(self, name: str, kind: str, since: float, **extra) -> None:
        """Journal a phase of the run (engine/timing.py): its name, kind and seconds since `since`."""
        self.result.timing.append(timing.phase(name, kind, since, **extra))

    def node(self, name: str) -> NodeResult:
        return self.result.nodes[name]

    def op_name(self, node: str, op_hash: str) -> str:
        name = self.names.get((node, op_hash))
        if name is None:
            name = ", ".join(seam.op_names(self.state, op_hash)) or op_hash
        return name

    def name_ops(self, host, deploy_name: str, hashes: Iterable[str]) -> None:
        """pyinfra shares op meta (and names) between hosts by op *position*; keep each host's own."""
        for op_hash in hashes:
            if not seam.host_has_op(self.state, host, op_hash):  # the deploy raised while this op was being added
                continue
            own = seam.op_data(self.state, host, op_hash).global_arguments.get("name")
            names = seam.op_names(self.state, op_hash)
            if own:
                match = [n for n in names if n == own or n.endswith(f" | {own}")]
                mine = [n for n in match if n.startswith(f"{deploy_name} | ")]
                name = (mine or match or [f"{deploy_name} | {own}"])[0]
            else:
                name = ", ".join(names)
            self.names[(host.name, op_hash)] = name

    def host_messages(self, host) -> str:
        lines = [ln for ln in self.capture.messages.get(host.name, []) if ln]
        return self.capture.scrub("; ".join(lines[-3:])) or ""

    def record(self, host, op_hash: str, status: str, *, reason: str | None = None,
               commands: Sequence = (), rc: int | None = None, stderr: str = "",
               ignored: bool = False, duration: float = 0.0) -> OpResult:
        for cmd in commands:
            self.capture.learn(cmd)
        if status == "unchanged" and reason is None:
            reasons = self.capture.reasons(host.name, op_hash)
            reason = "; ".join(reasons) if reasons else "no change needed"
        scrub = self.capture.scrub
        note = notes.take(host.name, op_hash)
        op = OpResult(name=self.op_name(host.name, op_hash), status=status, reason=scrub(reason),
                      commands=[scrub(_show(c)) or "" for c in commands], rc=rc,
                      stderr_tail=scrub(stderr) or "", ignored=ignored,
                      disruption=note.get("disruption") if status == "changed" else None,
                      diff=scrub(note.get("diff")) if status == "changed" else None,
                      rollout=note.get("rollout") if status == "changed" else None,
                      duration_s=round(duration, 3), files=note.get("files", []))
        self.node(host.name).ops.append(op)
        self.sink(Event(host.name, op.name, status, op.reason, mode=self.mode))
        return op

    def op_failed(self, host, op_hash: str, error: str, **kw) -> None:
        op = self.record(host, op_hash, "failed", reason=error, **kw)
        node = self.node(host.name)
        if node.error is None:
            where = f"; command: {op.commands[-1]}" if op.commands else ""
            rc = f" (rc={op.rc})" if op.rc is not None else ""
            node.error = f"{host.name}: op '{op.name}' failed{rc}: {op.reason}{where}"
            node.error_kind = "op-failed"
        self.state.failed_hosts.add(host)
        self.state.active_hosts.discard(host)


def waits_of(deploys: Sequence[Callable]) -> list[tuple[int, ...] | None]:
    """Per deploy, the positions of the earlier deploys it waits for on other nodes, from its
    `waits_for` names (components/: each declaration's waits); None, where it has none, waits for every earlier deploy."""
    names = [getattr(d, "deploy_name", d.__name__) for d in deploys]
    out: list[tuple[int, ...] | None] = []
    for i, d in enumerate(deploys):
        wanted = getattr(d, "waits_for", None)
        out.append(None if wanted is None else tuple(j for j in range(i) if names[j] in wanted))
    return out


def _prepare(run: Run, deploys: Sequence[Callable]) -> None:
    """add_deploy per host, so a deploy that raises for one node fails that node only."""
    state = run.state
    run.deploy_names = [getattr(d, "deploy_name", d.__name__) for d in deploys]
    run.waits = waits_of(deploys)
    for host in [h for h in state.inventory if h in state.active_hosts]:
        for deploy in deploys:
            before = len(seam.op_hashes(host))
            try:
                seam.add_deploy(state, deploy, host=host)
            except Exception as exc:  # noqa: BLE001
                node = run.node(host.name)
                node.error = run.capture.scrub(
                    f"{host.name}: deploy '{getattr(deploy, 'deploy_name', deploy.__name__)}' "
                    f"could not be prepared: {type(exc).__name__}: {exc}")
                node.error_kind = "deploy-error"
                state.failed_hosts.add(host)
                state.active_hosts.discard(host)
                break
            finally:
                added = seam.op_hashes(host)[before:]
                run.name_ops(host, getattr(deploy, "deploy_name", deploy.__name__), added)
                run.phases.setdefault(host.name, []).append(list(added))


def _disconnect(state: State) -> None:
    """pyinfra's SSH disconnect only drops its SFTP cache; close the SSH clients too."""
    try:
        seam.disconnect_all(state)
    except Exception:  # noqa: BLE001 - a failed disconnect changes no result
        pass
    for host in state.inventory:
        seam.close_ssh_client(host)


def run(cluster: Cluster, deploys: Sequence[Callable], *, mode: str = "plan",
        limit: Iterable[str] | None = None, on_event: EventSink | None = None,
        command: str = "apply", record: bool = True,
        connect_timeout: int = CONNECT_TIMEOUT,
        prepare: Callable[[State, list], None] | None = None, local: bool = False) -> RunResult:
    """Plan or apply `deploys` on the cluster's nodes (all, or `limit` names), in parallel.

    Never raises for a node problem: unreachable nodes and failed ops are in the result. Raises
    UsageError for a bad mode, an unknown node in `limit` or a missing SSH key file.
    `prepare(state, hosts)` runs after connecting, before the deploys are prepared.
    `local`: the one node in `limit` is this machine (pyinfra's @local, as root; corral node converge).
    What the run's deploys share lives in a fresh `RunContext` (engine/run_context.py), current while it runs.
    """
    if mode not in MODES:
        raise UsageError(f"unknown run mode {mode!r}", value=mode, fix="use 'plan' or 'apply'")
    t0 = time.monotonic()
    nodes = select_nodes(cluster, limit)
    result = RunResult(run_id=uuid.uuid4().hex[:12], command=command, mode=mode,
                       spec_hash=cluster.spec_hash(), started=_now())
    result.nodes = {n.name: NodeResult(node=n.name, address=n.address) for n in nodes}
    sink = _quiet(on_event)
    if local and len(nodes) != 1:
        raise UsageError("a local run converges exactly one node", value=",".join(n.name for n in nodes),
                         fix="name the node this machine is")
    seam.answer_lookups_once()
    inventory = local_inventory(cluster, nodes[0].name) if local else build_inventory(cluster, nodes)
    seam.quick_host_data(inventory)
    config = Config(CONNECT_TIMEOUT=connect_timeout, FAIL_PERCENT=None,  # nodes are configured as root
                    SUDO=cluster.spec.ssh.user != "root" and not local)
    state = State(inventory, config, check_for_changes=False)
    seam.never_raise_failed_hosts(state)
    capture = Capture()
    r = Run(state, cluster, capture, sink, mode, result)
    state.add_callback_handler(PyinfraEvents(sink, mode, r.op_name))
    interrupted: BaseException | None = None
    with capturing(capture), run_context.active(run_context.RunContext(mode=mode)):
        try:
            since = time.monotonic()
            for name, (kind, message) in connect(state, cluster).items():
                node = result.nodes[name]
                node.reachable, node.error, node.error_kind = False, message, kind
                sink(Event(name, None, "unreachable", message, mode=mode))
            r.timed("connect", "connect", since)
            if prepare is not None:  # e.g. gather facts every node's deploy needs, in parallel
                since = time.monotonic()
                prepare(state, [h for h in inventory if h in state.active_hosts])
                r.timed("facts", "facts", since)
            since = time.monotonic()
            _prepare(r, deploys)
            r.timed("prepare", "prepare", since)
            total = sum(len(seam.op_hashes(h)) for h in inventory if h in state.active_hosts)
            sink(Event(None, None, "start", total=total, mode=mode))
            (execute.plan if mode == "plan" else execute.apply)(r)
        except BaseException as exc:  # Ctrl-C or an engine bug: journal what happened, re-raise
            interrupted = exc
            result.warnings.append(f"run interrupted: {type(exc).__name__}: {exc}".strip())
            for node in result.nodes.values():
                if node.reachable and node.error is None:
                    node.error, node.error_kind = f"{node.node}: run interrupted", "interrupted"
        finally:
            _disconnect(state)
    result.warnings += sorted(set(capture.scrub(w) or "" for w in capture.general))
    result.finished = _now()
    result.duration_s = time.monotonic() - t0
    sink(Event(None, None, "end", mode=mode))
    if record:
        try:
            journal.record(cluster.state_dir, result)
        except CorralError as exc:  # the run happened: never hide its result behind the journal
            result.warnings.append(f"journal not written: {exc}")
    if interrupted is not None:
        raise interrupted
    return result
