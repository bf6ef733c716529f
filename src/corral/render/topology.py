"""topology.conf and slurm.conf's TopologyPlugin from `topology:` (pure). topology/tree: one line per
switch, `SwitchName=leaf1 Nodes=gpu[01-16]` / `SwitchName=spine Switches=leaf[1-2]`; topology/block:
`BlockName=nvl1 Nodes=gb[01-18]`. Configless Slurm hands the file to every slurmd with slurm.conf; a
change is a slurmctld restart, then reconfigure (deploy/slurm.py), as a change of the node set is."""

from __future__ import annotations

from corral.errors import CorralError
from corral.render.hw import hostlist
from corral.spec.cluster import Cluster
from corral.spec.hosts import expand_names
from corral.spec.rules_topology import BLOCK_SINCE

PATH = "/etc/slurm/topology.conf"


def topology_conf(cluster: Cluster) -> str | None:
    """The file's text; None without a topology."""
    t = cluster.spec.topology
    if t is None:
        return None
    out = ["# Managed by corral from cluster.yaml `topology:` (docs/components/fabric.md)", f"# {t.plugin}"]
    for s in t.switches:
        words = [f"SwitchName={s.name}"]
        if s.nodes:
            words.append(f"Nodes={hostlist(expand_names(s.nodes))}")
        if s.switches:
            words.append(f"Switches={hostlist(list(s.switches))}")
        out.append(" ".join(words))
    out += [f"BlockName={b.name} Nodes={hostlist(expand_names(b.nodes))}" for b in t.blocks]
    return "\n".join(out) + "\n"


def slurm_lines(cluster: Cluster, version: tuple[int, int]) -> list[str]:
    t = cluster.spec.topology
    if t is None:
        return []
    if t.blocks and version < BLOCK_SINCE:
        raise CorralError(f"topology.blocks: topology/block needs Slurm 23.11 or later; the controller runs "
                          f"{version[0]}.{version[1]:02d}", value="topology.blocks",
                          fix="use topology.switches (topology/tree), or upgrade Slurm first")
    return ["", "# Network topology (topology.conf): jobs placed on as few switches as they fit",
            f"TopologyPlugin={t.plugin}"]
