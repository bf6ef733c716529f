"""`topology: {discover: infiniband}`: the fabric read once per run while the run prepares (the gather
hook, deploy/context.py): `ibnetdiscover` on the first compute node of the run that has it, then on a
compute node that output did not show (another fabric), up to MAX_RUNS outputs and MAX_TRIES nodes asked;
what it printed is kept in the state dir (fabric/ibnetdiscover.json), so a run that reaches no such node
(or --limit leaves them out) renders the last topology seen, never none. Rendering: render/topology.py."""

from __future__ import annotations

from corral.engine.pyinfra_seam import as_host
from pyinfra.facts.server import Command

from corral.facts.ibnetdiscover import load_fabric_cache, parse, save_fabric_cache
from corral.errors import CorralError

MAX_RUNS = 8    # outputs kept (fabrics)
MAX_TRIES = 16  # nodes asked in all: CPU-only or HCA-less compute nodes answer quickly, but one by one
TIMEOUT_S = 120
MISSING = "corral-no-ibnetdiscover"
COMMAND = (f"command -v ibnetdiscover >/dev/null 2>&1 || {{ echo {MISSING}; exit 0; }}; "
           f"timeout {TIMEOUT_S} ibnetdiscover 2>/dev/null || echo corral-ibnetdiscover-failed")


def cached(cluster) -> dict[str, str]:
    return load_fabric_cache(cluster.state_dir)


def _read(state, h):
    """(its output, the parsed fabric), or None where ibnetdiscover is missing, fails or prints no fabric."""
    with as_host(state, h):
        try:
            text = h.get_fact(Command, COMMAND) or ""
        except Exception:  # noqa: BLE001 - an unreadable node: the next one is asked
            return None
    if MISSING in text or "corral-ibnetdiscover-failed" in text:
        return None
    try:
        return text, parse(text)
    except CorralError:
        return None


def discover(cluster, state, hosts) -> dict[str, str]:
    """node -> ibnetdiscover output (this run's, else the state dir's last)."""
    t = cluster.spec.topology
    if t is None or not t.discover or t.ibnetdiscover_file:
        return {}
    compute = {n.name for n in cluster.with_role("compute")}
    seen: set[str] = set()
    found: dict[str, str] = {}
    tries = 0
    for h in [h for h in hosts if h.name in compute]:
        if len(found) >= MAX_RUNS or tries >= MAX_TRIES:
            break
        if h.name in seen:
            continue
        tries += 1
        read = _read(state, h)
        if read is None:
            continue
        found[h.name] = read[0]
        seen |= {n.host for n in read[1].of("ca")}
    if found:
        save_fabric_cache(cluster.state_dir, found)
        return found
    return cached(cluster)
