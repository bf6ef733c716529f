"""`corral fanout`: the node-local deploys on compute nodes, through Slurm (fanout/slurm.py) or,
for comparison and where Slurm cannot be used, through the SSH engine; one RunResult either way,
journaled like an apply (command "fanout (slurm)" / "fanout (ssh)")."""

from __future__ import annotations

import json
import time
import uuid

from corral.deploy.context import gather, mark_job_hooks
from corral.engine import journal, remote, run
from corral.engine.handoff import Handoff
from corral.engine.inventory import select_nodes
from corral.engine.results import NodeResult, OpResult, RunResult
from corral.engine.runner import _now
from corral.engine.shell import q
from corral.engine.timing import phase
from corral.errors import CorralError, UsageError
from corral.fanout import runtime, slurm
from corral.fanout.node import collect
from corral.fanout.snapshot import check_deploys, make, node_local
from corral.render.hw import hostlist
from corral.spec.cluster import Cluster
from corral.spec.releases import release

VIAS = ("slurm", "ssh")
CONVERGE_S = 300
UPLOAD_S = 300


def targets(cluster: Cluster, limit: list[str] | None) -> list[str]:
    nodes = [n.name for n in select_nodes(cluster, limit) if "compute" in n.roles]
    if not nodes:
        raise UsageError("no compute node to converge", value=",".join(limit or []),
                         fix="the node-local deploys run on compute nodes: name some with --limit, or none for all")
    return nodes


def fan_out(cluster: Cluster, deploys: list[str], *, mode: str = "apply", limit: list[str] | None = None,
            via: str = "slurm") -> RunResult:
    if via not in VIAS:
        raise UsageError(f"unknown fan-out {via!r}", value=via, fix="use --via slurm or --via ssh")
    if mode not in ("plan", "apply"):
        raise UsageError(f"unknown mode {mode!r}", value=mode, fix="use plan or apply")
    names = check_deploys(deploys)
    nodes = targets(cluster, limit)
    if via == "ssh":
        chosen = [node_local()[n] for n in names]
        result = run(cluster, chosen, mode=mode, limit=nodes, command="fanout (ssh)", prepare=gather(cluster))
    else:
        result = _via_slurm(cluster, names, mode, nodes)
    if mode == "apply":
        mark_job_hooks(cluster, result)
    return result


def _controller(cluster: Cluster) -> str:
    ctl = cluster.with_role("controller")
    if not ctl:
        raise UsageError("the fan-out through Slurm needs a controller in the spec", fix="use --via ssh")
    return ctl[0].name


def nodes_python(cluster: Cluster, nodes: list[str]) -> str:
    """The Python ("X.Y") of the nodes' release, the one the runtime is built for; a UsageError when
    the nodes' releases have different Pythons (one runtime, one Python)."""
    by_python: dict[str, list[str]] = {}
    for n in nodes:
        by_python.setdefault(release(cluster.node(n).os).python, []).append(n)
    if len(by_python) > 1:
        said = "; ".join(f"Python {py}: {hostlist(sorted(ns))}" for py, ns in sorted(by_python.items()))
        raise UsageError(f"the nodes to converge run different Pythons ({said}), one fan-out runs one",
                         fix="run fanout with --limit for each release's nodes")
    return next(iter(by_python))


def _via_slurm(cluster: Cluster, names: list[str], mode: str, nodes: list[str]) -> RunResult:
    python = nodes_python(cluster, nodes)  # refused before anything is built, sent or journaled
    t0 = time.monotonic()
    result = RunResult(run_id=uuid.uuid4().hex[:12], command="fanout (slurm)", mode=mode,
                       spec_hash=cluster.spec_hash(), started=_now())
    result.nodes = {n: NodeResult(node=n, address=cluster.node(n).address) for n in nodes}
    ctl = _controller(cluster)
    try:
        since = time.monotonic()
        rt = runtime.build(cluster.state_dir, python=python)
        result.timing.append(phase("runtime", "prepare", since, size=rt.size, id=rt.id))
        since = time.monotonic()
        _ship(cluster, ctl, rt, make(cluster, run_id=result.run_id, mode=mode, deploys=names, runtime=rt.id),
              result.run_id)
        result.timing.append(phase("ship to controller", "connect", since))
        since = time.monotonic()
        text = slurm.script(hostlist(nodes), len(nodes), rt.id, rt.python, result.run_id, CONVERGE_S)
        proc = remote.run_on(cluster, ctl, text, timeout=CONVERGE_S + slurm.SBCAST_S + 4 * slurm.STEP_S)
        result.timing.append(phase("srun", "deploy", since, deploys=names))
        _merge(result, proc.stdout.splitlines() + proc.stderr.splitlines(), proc.returncode)
    except (CorralError, OSError) as exc:  # the runtime unreadable/unwritable, SSH failed: every node says so
        for node in result.nodes.values():
            if node.error is None and not node.ops:
                node.error, node.error_kind = f"{node.node}: not converged: {exc}", "fanout"
    result.finished = _now()
    result.duration_s = time.monotonic() - t0
    try:
        journal.record(cluster.state_dir, result)
    except CorralError as exc:
        result.warnings.append(f"journal not written: {exc}")
    return result


def _ship(cluster: Cluster, ctl: str, rt: runtime.Runtime, snap: dict, run_id: str) -> None:
    """The snapshot (0600) and, when the controller lacks it, the runtime tarball (older ones removed)."""
    tgz = slurm.tarball(rt.id)
    have = remote.run_on(cluster, ctl, f"umask 077 && mkdir -p {q(slurm.DIR)} && cat > {q(f'{slurm.DIR}/{run_id}.json')} "
                                       f"&& {{ test -f {q(tgz)} && echo have || echo lacking; }}",
                         timeout=60, check=True, input=json.dumps(snap))
    if "have" not in have.stdout:
        remote.stream(cluster, ctl, f"umask 077 && cat > {q(tgz)}.tmp && mv -f {q(tgz)}.tmp {q(tgz)} && "
                                    f"find {q(slurm.DIR)} -maxdepth 1 -name 'corral-runtime-*.tar.gz' "
                                    f"! -name {q(tgz.rsplit('/', 1)[1])} -delete",
                      timeout=UPLOAD_S, stdin=rt.path)


def _merge(result: RunResult, lines: list[str], rc: int) -> None:
    found, other = collect(lines)
    reasons: dict[str, str] = {}
    general: list[str] = []
    on_nodes: dict[str, dict] = {}
    for line in other:
        words = line.split(" ", 2)
        if words[0] == slurm.FAIL and len(words) == 3:
            if words[1] in result.nodes:
                reasons[words[1]] = words[2]
            else:
                general.append(words[2])
        elif not line.startswith(slurm.FAIL):
            general.append(line)
    for name, node in result.nodes.items():
        data = found.get(name)
        if data is None:
            why = reasons.get(name) or "; ".join(general[-3:]) or f"no result (the controller's script exited {rc})"
            node.error, node.error_kind = f"{name}: not converged: {why}", "fanout"
            continue
        node.ops = [OpResult(**{k: Handoff.of(v) if k == "rollout" else v for k, v in o.items()
                               if k in OpResult.__dataclass_fields__}) for o in data.get("ops") or []]
        node.error, node.error_kind = data.get("error"), data.get("error_kind")
        result.warnings += [w for w in data.get("warnings") or [] if w not in result.warnings]
        on_nodes[name] = {"s": data.get("duration_s"), "cpu_s": data.get("cpu_s")}
    if result.timing and result.timing[-1]["name"] == "srun":
        result.timing[-1]["nodes"] = on_nodes  # each node's own wall and CPU seconds
