"""Where a run's time went: its phases (connect, facts, prepare, each deploy, each rollout), split
into categories by what the slowest node did in each deploy (install, services, config, ...).

Pure functions over a run as journaled (RunResult.to_json()), so `apply` (its last line) and
`corral history --run ID --timing` read the same numbers. A deploy is a barrier: every node runs its
ops for it, the next deploy starts when the slowest is done, so the slowest node's ops are the
deploy's time; what the ops do not account for (scheduling, pyinfra's own work) is "engine".
"""

from __future__ import annotations

import re
import time

# what an op spent its time on, from the commands it ran (the first match wins)
_INSTALL = re.compile(r"\bapt-get\b.*\b(install|upgrade|dist-upgrade)\b|\bdpkg\s+(-i|--install)\b")
_SERVICE = re.compile(r"\bsystemctl\s+(restart|start|reload|try-restart)\b|not ready after \d+ s")
_CONFIG = re.compile(r"^(upload |mv -f |install -d |chmod |chown |ln -s)")
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
    commands = op.get("commands") or []
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
    """A deploy phase's wall time by category, from its slowest node's ops (the rest: engine)."""
    wall = float(phase.get("s") or 0.0)
    deploys = phase.get("deploys", [phase.get("name")])  # None: every deploy (plan's one phase)
    names = set(deploys) if deploys is not None else None
    best, best_ops, best_sum = None, [], -1.0
    for node in run.get("nodes") or {}:
        ops = _ops_of(run, node, names)
        total = sum(float(o.get("duration_s") or 0.0) for o in ops)
        if total > best_sum:
            best, best_ops, best_sum = node, ops, total
    split: dict[str, float] = {}
    for op in best_ops:
        split[category(op)] = split.get(category(op), 0.0) + float(op.get("duration_s") or 0.0)
    accounted = sum(split.values())
    if accounted > wall > 0:  # clocks read at slightly different points: scale into the wall time
        split = {k: v * wall / accounted for k, v in split.items()}
    elif wall > accounted:
        split["engine"] = wall - accounted
    return split, best


def breakdown(run: dict) -> dict:
    """{total_s, categories: {name: s} (largest first), phases: [{name, kind, s, node}],
    slowest_ops: [{node, op, s, status, category}] (ten)}."""
    total = float(run.get("duration_s") or 0.0)
    categories: dict[str, float] = {}
    phases = []
    for phase in run.get("timing") or []:
        kind, s = phase.get("kind"), float(phase.get("s") or 0.0)
        node = None
        if kind == "deploy":
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
