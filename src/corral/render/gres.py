"""gres.conf for the whole cluster (configless Slurm serves the one file to every slurmd)."""

from __future__ import annotations

from collections.abc import Mapping

from corral.facts.records import NodeHW
from corral.render.hw import hostlist, name_key
from corral.render.mig import gres_lines
from corral.render.slurm import DEFAULT_VERSION, Version, compute_nodes, header
from corral.spec.cluster import Cluster


def _devices(count: int) -> str:
    return "/dev/nvidia0" if count == 1 else f"/dev/nvidia[0-{count - 1}]"


def _topology(node, hw: Mapping[str, NodeHW]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The node's GPU Cores=/Links= when its facts have them for exactly its spec GPU count."""
    facts = hw.get(node.name)
    if facts is None or len(facts.gpu_links) != node.gpus.count or len(facts.gpu_cores) != node.gpus.count:
        return (), ()
    return facts.gpu_cores, facts.gpu_links


def render_gres_conf(cluster: Cluster, hw: Mapping[str, NodeHW] | None = None, *,
                     version: Version = DEFAULT_VERSION) -> str:
    """One line per group of GPU nodes with the same GPU model and count.

    AutoDetect=nvml: NVML finds the device files (and cores, links); the line gives the type and
    count to check against (the type must be a substring of the detected name: h100 of
    nvidia_h100_80gb_hbm3). AutoDetect=off: the device files /dev/nvidia0..N-1 are listed; where
    the node's facts hold `nvidia-smi topo -m` (facts/hardware.py), one line per GPU with its
    Cores= (CPU affinity as Slurm core indices) and Links= (NVLinks to each other GPU); a node
    whose facts found MIG devices gets one line per whole GPU and per MIG device (MultipleFiles=).
    """
    nvml, hw = cluster.spec.slurm.gres_autodetect == "nvml", hw or {}
    groups: dict[tuple, list[str]] = {}
    mig_lines: list[str] = []
    for n in compute_nodes(cluster):
        if n.gpus is None:
            continue
        facts = hw.get(n.name)
        if facts is not None and facts.mig and not nvml:  # MIG devices: one line each (render/mig.py)
            mig_lines += gres_lines(n.name, n.gpus.model, n.gpus.count, facts, _topology(n, hw))
            continue
        topo = () if nvml else _topology(n, hw)
        groups.setdefault((n.gpus.model, n.gpus.count, topo), []).append(n.name)
    out = header(cluster, version) + ["AutoDetect=nvml" if nvml else "AutoDetect=off"]
    for (model, count, topo), names in sorted(groups.items(), key=lambda kv: name_key(kv[1][0])):
        where = f"NodeName={hostlist(names)} Name=gpu Type={model}"
        if nvml:
            out.append(f"{where} Count={count}")
        elif topo and topo[1]:
            for i, (cores, links) in enumerate(zip(*topo)):
                out.append(f"{where} File=/dev/nvidia{i}" + (f" Cores={cores}" if cores else "") + f" Links={links}")
        else:
            out.append(f"{where} File={_devices(count)}")
    return "\n".join(out + mig_lines) + "\n"
