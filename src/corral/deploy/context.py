"""What every run reads of every node before it prepares the deploys: hardware facts, gathered in
parallel once per run (and cached in the state dir, so nodes outside `--limit` or unreachable keep their
line in slurm.conf), the installed Slurm version, the fabric; kept in the run's context
(engine/run_context.py), where the deploys read them."""

from __future__ import annotations

import gevent
from pyinfra.api import FactBase
from corral.engine import run_context
from corral.engine.pyinfra_seam import as_host

from corral.deploy.nodestate import NodeState, Want, _union, parse_snapshot
from corral.errors import CorralError
from corral.facts.hardware import NodeHardware, parse_hardware
from corral.facts.slurm import INSTALLED_VERSION, installed_in, load_hw_cache, parse_slurm_version, save_hw_cache

SPLIT = "@@corral-node-state@@"


class HardwareAndState(FactBase):
    """NodeHardware and the node snapshot (deploy/nodestate.py) in one round trip: what every run reads
    of every node before it prepares anything."""

    def command(self, paths=(), services=(), packages=(), blocks=()):
        return (f"{{ {NodeHardware().command()}; }}; echo {SPLIT}; "
                + NodeState().command(paths=paths, services=services, packages=packages, blocks=blocks))

    def process(self, output):
        lines = list(output)
        cut = lines.index(SPLIT) if SPLIT in lines else len(lines)
        return parse_hardware(lines[:cut]), parse_snapshot(lines[cut + 1:])


def read_node(h):
    """(hardware, snapshot) of one node in one command; the snapshot kept for the run's operations
    (nodestate.snapshot reads it from the run's context)."""
    full = _union(Want())
    hw, snap = h.get_fact(HardwareAndState, paths=full.paths, services=full.services, packages=full.packages,
                          blocks=full.blocks)
    snap.want = full
    run_context.current().snapshots[h.name] = snap
    return hw


def gather(cluster):
    """A `prepare` hook for engine.run: the run context's `hw` {node: NodeHW}, `in_run`, `slurm_version`
    and `fabric`."""
    def hook(state, hosts) -> None:
        found = {}

        versions = []

        def one(h) -> None:
            with as_host(state, h):
                try:
                    hw = read_node(h)
                    if "controller" in h.data.corral_node.roles:
                        versions.append(_version(h))
                except Exception:  # noqa: BLE001 - a node whose facts fail keeps its cached line
                    hw = None
            if hw is not None:
                found[h.name] = hw

        gevent.joinall([gevent.spawn(one, h) for h in hosts])
        cached = load_hw_cache(cluster.state_dir)
        merged = {**cached, **found}
        if merged != cached:
            save_hw_cache(cluster.state_dir, merged)
        ctx = run_context.current()
        ctx.hw = {n.name: merged[n.name] for n in cluster.nodes if n.name in merged}
        ctx.in_run = set(found)  # reachable nodes of this run
        # the files are written for the Slurm slurm.version pins (an upgrade's target: its daemons read them
        # after the upgrade, and a second apply then has nothing to rewrite), else for the controller's
        pinned = cluster.spec.slurm.version
        from corral.render.slurm import slurm_version_tuple
        from corral.spec.releases import slurm_tuple
        controllers = cluster.with_role("controller")  # none reachable: the Slurm its release ships
        own = slurm_tuple(controllers[0].os) if controllers else DEFAULT_VERSION
        ctx.slurm_version = (slurm_version_tuple(pinned) if pinned else versions[0] if versions else own)
        from corral.deploy.fabric import discover
        ctx.fabric = discover(cluster, state, [h for h in hosts if h.name in found])
    return hook


# installed (facts/slurm.py, the one reader), else the version apt would install
VERSION_CMD = (f"{INSTALLED_VERSION}; echo @@candidate; "
               "apt-cache policy slurm-client 2>/dev/null | awk '/Candidate:/ {print $2}'")


def _version(h) -> tuple[int, int]:
    """The Slurm version installed (or to be installed) on a controller; its release's if unknown."""
    from pyinfra.facts.server import Command

    from corral.render.slurm import slurm_version_tuple
    snap = run_context.current().snapshots.get(h.name)
    text = installed_in(snap.packages) if snap is not None else None  # read already: no round trip
    if not text:
        found, _, candidate = (h.get_fact(Command, VERSION_CMD) or "").partition("@@candidate")
        text = parse_slurm_version(found.splitlines()) or candidate.strip()
    from corral.spec.releases import slurm_tuple
    own = slurm_tuple(h.data.corral_node.os)  # the node's release's Slurm where nothing else says
    try:
        return slurm_version_tuple(text) if text and text != "(none)" else own
    except (ValueError, CorralError):
        return own


DEFAULT_VERSION = (22, 5)


def slurm_version() -> tuple[int, int]:
    """This run's Slurm version (Debian 12's where the run had no gather hook)."""
    return run_context.current().slurm_version or DEFAULT_VERSION


JOB_HOOK_OP = "jobhooks | /usr/local/sbin/corral-prolog"


def mark_job_hooks(cluster, result) -> None:
    """After an apply: the nodes whose Prolog is now in place are recorded in the facts cache (their
    facts were read before the run installed it), so a later run without them still names it."""
    done = [name for name, n in result.nodes.items()
            if any(o.name == JOB_HOOK_OP and o.status in ("changed", "unchanged") for o in n.ops)]
    cached = load_hw_cache(cluster.state_dir)
    stale = [name for name in done if name in cached and not cached[name].job_hooks]
    if stale:
        from dataclasses import replace
        save_hw_cache(cluster.state_dir, {**cached, **{n: replace(cached[n], job_hooks=True) for n in stale}})
