"""topology.conf and slurm.conf's TopologyPlugin from `topology:` (pure). topology/tree: one line per
switch, `SwitchName=leaf1 Nodes=gpu[01-16]` / `SwitchName=spine Switches=leaf[1-2]`; topology/block:
`BlockName=nvl1 Nodes=gb[01-18]`; `discover: infiniband`: the switches derived from ibnetdiscover's output
(render/topology_discover.py; `fabric`: node -> its output, gathered by deploy/context.py, or the spec's
saved file). Configless Slurm hands the file to every slurmd with slurm.conf; a change is a slurmctld
restart, then reconfigure (deploy/slurm.py), as a change of the node set is."""

from __future__ import annotations

import functools
from collections.abc import Mapping

from corral.errors import CorralError
from corral.render.hw import hostlist
from corral.spec.cluster import Cluster
from corral.spec.hosts import expand_names
from corral.spec.models_topology import Switch
from corral.render.topology_discover import OFF_FABRIC  # nodes not on the fabric: single-node jobs only
from corral.spec.rules_topology import BLOCK_SINCE, fabric_file

PATH = "/etc/slurm/topology.conf"


def discovered(cluster: Cluster, fabric: Mapping[str, str] | None):
    """The discovered topology (a Discovered), or None: not asked for, or nothing discovered yet."""
    t = cluster.spec.topology
    if t is None or not t.discover:
        return None
    path = fabric_file(cluster)
    texts = (path.read_text(),) if path is not None else tuple(fabric[n] for n in sorted(fabric or {}))
    return _derive(texts, tuple(n.name for n in cluster.with_role("compute"))) if texts else None


@functools.lru_cache(maxsize=4)
def _derive(texts: tuple[str, ...], compute: tuple[str, ...]):
    """Parsed and derived once per fabric: topology.conf, slurm.conf's lines and the warnings all ask."""
    from corral.facts.ibnetdiscover import Fabric, parse
    from corral.render.topology_discover import discover
    merged = Fabric()
    for text in texts:
        merged.nodes.update(parse(text).nodes)
    return discover(merged, list(compute))


def switches_of(cluster: Cluster, fabric: Mapping[str, str] | None) -> tuple[list[Switch], list[str]] | None:
    t = cluster.spec.topology
    if not t.discover:
        return list(t.switches), []
    d = discovered(cluster, fabric)
    if d is None:
        return None
    source = (f"the saved output {t.ibnetdiscover_file}" if t.ibnetdiscover_file
              else f"ibnetdiscover on {hostlist(sorted(fabric or {}))}")
    notes = [f"# discovered from {source}", *(f"#   {n}" for n in d.notes)]
    switches = list(d.switches)
    if d.missing:
        notes.append(f"#   {OFF_FABRIC}: compute nodes not on the fabric (jobs on one node only)")
        switches.append(Switch(name=OFF_FABRIC, nodes=",".join(d.missing)))
    return switches, notes


def topology_conf(cluster: Cluster, fabric: Mapping[str, str] | None = None) -> str | None:
    """The file's text; None without a topology (or with one to discover that nothing discovered yet)."""
    t = cluster.spec.topology
    if t is None:
        return None
    found = switches_of(cluster, fabric)
    if found is None:
        return None
    switches, notes = found
    out = ["# Managed by corral from cluster.yaml `topology:` (docs/components/fabric.md)", f"# {t.plugin}", *notes]
    for s in switches:
        words = [f"SwitchName={s.name}"]
        if s.nodes:
            words.append(f"Nodes={hostlist(expand_names(s.nodes))}")
        if s.switches:
            words.append(f"Switches={hostlist(list(s.switches))}")
        out.append(" ".join(words))
    out += [f"BlockName={b.name} Nodes={hostlist(expand_names(b.nodes))}" for b in t.blocks]
    return "\n".join(out) + "\n"


def slurm_lines(cluster: Cluster, version: tuple[int, int], fabric: Mapping[str, str] | None = None) -> list[str]:
    t = cluster.spec.topology
    if t is None or (t.discover and discovered(cluster, fabric) is None):
        return []
    if t.blocks and version < BLOCK_SINCE:
        raise CorralError(f"topology.blocks: topology/block needs Slurm 23.11 or later; the controller runs "
                          f"{version[0]}.{version[1]:02d}", value="topology.blocks",
                          fix="use topology.switches (topology/tree), or upgrade Slurm first")
    out = ["", "# Network topology (topology.conf): jobs placed on as few switches as they fit",
           f"TopologyPlugin={t.plugin}"]
    if t.route and _one_top(cluster, fabric):  # slurmd's messages along the tree (23.11: a TopologyParam)
        out.append("TopologyParam=RouteTree" if version >= (23, 11) else "RoutePlugin=route/topology")
    return out


def _routed(cluster: Cluster) -> bool:
    return bool(cluster.spec.topology and cluster.spec.topology.route)


def _one_top(cluster: Cluster, fabric: Mapping[str, str] | None) -> bool:
    """The switches (declared, or as discovered: nodes off the fabric make a second top) form one tree."""
    found = switches_of(cluster, fabric)
    if not found:
        return False
    children = {c for s in found[0] for c in s.switches}
    return sum(1 for s in found[0] if s.name not in children) == 1


def discovery_warnings(cluster: Cluster, fabric: Mapping[str, str] | None) -> list[str]:
    """What the discovery found amiss: spec nodes not on the fabric, fabric hosts not in the spec."""
    d = discovered(cluster, fabric)
    if d is None:
        t = cluster.spec.topology
        return (["topology.discover: nothing discovered yet (no compute node could run ibnetdiscover: "
                 "infiniband-diags comes with this apply; the next plan or apply reads the fabric)"]
                if t is not None and t.discover else [])
    out = []
    if d.missing:
        out.append(f"topology: {hostlist(d.missing)} not on the fabric ibnetdiscover saw: in topology.conf under "
                   f"{OFF_FABRIC} (Slurm gives them single-node jobs only); check their HCAs and cables")
    if _routed(cluster) and not _one_top(cluster, fabric):
        out.append("topology.route: not set in slurm.conf: the discovered switches have more than one top "
                   "(Slurm routes only a fully connected tree)")
    if d.extra:
        out.append(f"topology: the fabric has hosts the spec does not: {', '.join(d.extra[:8])}"
                   + (f" and {len(d.extra) - 8} more" if len(d.extra) > 8 else "") + " (left out of topology.conf)")
    return out
