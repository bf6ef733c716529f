"""Where a run's time went: its phases (connect, facts, prepare, each deploy, each rollout), split
into categories by what the slowest node did in each deploy (install, services, config, ...).

Pure functions over a run as journaled (RunResult.to_json()), so `apply` (its last line) and
`corral history --run ID --timing` read the same numbers. An apply's deploys overlap across nodes
(each node goes on unless a deploy waits for others: the components declarations, components/), so its time is split along
the node that took longest: its ops by category, its waits for other nodes ("waits"), and what the
ops do not account for (scheduling, pyinfra's own work) as "engine". Runs journaled before that (a
barrier per deploy, no `start`) split each deploy by its slowest node, as they ran.
"""

from __future__ import annotations

import re
import time

from corral.engine.chain import parts

# what an op spent its time on, from the commands it ran (the first match wins)
_INSTALL = re.compile(r"\bapt-get\b.*\b(install|upgrade|dist-upgrade)\b|\bdpkg\s+(-i|--install)\b")
_SERVICE = re.compile(r"\bsystemctl\s+(restart|start|reload|try-restart)\b|not ready after \d+ s")
_CONFIG = re.compile(r"^(upload |mv -f |install -d |install -m \S+ -o \S+ -g \S+ /dev/null |mkdir -p |chmod |chown |ln -s)")
# the steps of a rollout or a removal (workflows/): timed as they end (engine/results.TimedSteps)
_WORKFLOW = re.compile(r"^(driver rollout|package upgrade|MIG rollout|slurm upgrade|remove node)( \||$)")
PHASE_KINDS = ("connect", "facts", "prepare", "deploy", "rollout", "removal", "journal")


def phase(name: str, kind: str, since: float, **extra) -> dict:
    """One phase of a run as RunResult.timing holds it: its name, kind and seconds since `since` (monotonic)."""
    return {"name": name, "kind": kind, "s": round(time.monotonic() - since, 3), **extra}


def category(op: dict) -> str:
    """install | services | config | commands (a change) | checks (no change: facts read, compared);
    a rollout's or a removal's step: rollouts."""
    if _WORKFLOW.match(op.get("name", "")):
        return "rollouts"
    if op.get("status") != "changed" and op.get("status") != "failed":
        return "checks"
    commands = [part for c in op.get("commands") or [] for part in parts(c)]  # a chain's commands (engine/chain.py)
    if any(_INSTALL.search(c) for c in commands):
        return "install"
    if any(_SERVICE.search(c) for c in commands):
        return "services"
    if commands and all(_CONFIG.search(c) or c.startswith("systemctl daemon-reload") for c in commands):
        return "config"
    return "commands"


def _ops_of(run: dict, node: str, names: set[str] | None) -> list[dict]:
    ops = ((run.get("nodes") or {}).get(node) or {}).get("ops") or []
    return [o for o in ops if names is None or o.get("name", "").split(" | ")[0] in names]


def _deploy_split(run: dict, phase: dict) -> tuple[dict[str, float], str | None]:
    """A deploy phase's wall time by category, from its slowest node's ops and its waits for other
    nodes ("waits"); the rest: engine. A phase with `waited` is the apply's deploys, overlapping."""
    wall = float(phase.get("s") or 0.0)
    deploys = phase.get("deploys", [phase.get("name")])  # None: every deploy (plan's one phase)
    names = set(deploys) if deploys is not None else None
    waited = phase.get("waited") or {}
    best, best_ops, best_sum = None, [], -1.0
    for node in run.get("nodes") or {}:
        ops = _ops_of(run, node, names)
        total = sum(float(o.get("duration_s") or 0.0) for o in ops) + float(waited.get(node) or 0.0)
        if total > best_sum:
            best, best_ops, best_sum = node, ops, total
    split: dict[str, float] = {}
    for op in best_ops:
        split[category(op)] = split.get(category(op), 0.0) + float(op.get("duration_s") or 0.0)
    if waited.get(best):
        split["waits"] = float(waited[best])
    accounted = sum(split.values())
    if accounted > wall > 0:  # clocks read at slightly different points: scale into the wall time
        split = {k: v * wall / accounted for k, v in split.items()}
    elif wall > accounted:
        split["engine"] = wall - accounted
    return split, best


def _overlapping(phases: list[dict]) -> dict:
    """The apply's deploys, which overlap across nodes (engine/execute.apply journals each with its
    `start`), as one phase: their wall time, names, and each node's waits for the others."""
    end = max(float(p.get("start") or 0.0) + float(p.get("s") or 0.0) for p in phases)
    begin = min(float(p.get("start") or 0.0) for p in phases)
    waited: dict[str, float] = {}
    for p in phases:
        for node, s in (p.get("waited") or {}).items():
            waited[node] = waited.get(node, 0.0) + float(s)
    return {"s": end - begin, "deploys": [p.get("name") for p in phases], "waited": waited}


def breakdown(run: dict) -> dict:
    """{total_s, categories: {name: s} (largest first), phases: [{name, kind, s, node}],
    slowest_ops: [{node, op, s, status, category}] (ten)}."""
    total = float(run.get("duration_s") or 0.0)
    categories: dict[str, float] = {}
    phases = []
    timing = run.get("timing") or []
    overlapping = [p for p in timing if p.get("kind") == "deploy" and "start" in p]
    if overlapping:  # split once, along the node that took longest (its ops and its waits)
        split, _ = _deploy_split(run, _overlapping(overlapping))
        for k, v in split.items():
            categories[k] = categories.get(k, 0.0) + v
    for phase in timing:
        kind, s = phase.get("kind"), float(phase.get("s") or 0.0)
        node = None
        if kind == "deploy":
            if "start" in phase:  # counted above; its slowest node, for the phase's row
                node = _deploy_split(run, {"s": s, "name": phase.get("name")})[1]
                split = {}
            else:
                split, node = _deploy_split(run, phase)
        else:
            split = {"rollouts" if kind == "rollout" else kind: s}
        for k, v in split.items():
            categories[k] = categories.get(k, 0.0) + v
        phases.append({"name": phase.get("name"), "kind": kind, "s": round(s, 3), "node": node})
    accounted = sum(categories.values())
    if total > accounted and categories:
        categories["engine"] = categories.get("engine", 0.0) + total - accounted
    ops = [{"node": node, "op": o.get("name"), "s": round(float(o.get("duration_s") or 0.0), 3),
            "status": o.get("status"), "category": category(o)}
           for node, data in (run.get("nodes") or {}).items() for o in data.get("ops") or []]
    ops.sort(key=lambda o: -o["s"])
    return {"total_s": round(total, 3),
            "categories": {k: round(v, 3) for k, v in sorted(categories.items(), key=lambda kv: -kv[1])},
            "phases": phases, "slowest_ops": ops[:10]}


def one_line(timing: dict, shown: int = 5) -> str:
    """time: 41.2 s (install 55 %, services 20 %, checks 9 %, facts 6 %, config 4 %)."""
    total = timing["total_s"]
    if total <= 0 or not timing["categories"]:
        return f"time: {total:.1f} s"
    parts = [f"{name} {round(100 * s / total)} %" for name, s in timing["categories"].items()
             if round(100 * s / total) >= 1][:shown]
    return f"time: {total:.1f} s ({', '.join(parts)})" if parts else f"time: {total:.1f} s"
