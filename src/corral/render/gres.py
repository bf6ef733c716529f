"""gres.conf for the whole cluster (configless Slurm serves the one file to every slurmd)."""

from __future__ import annotations

from corral.render.hw import hostlist, name_key
from corral.render.slurm import DEFAULT_VERSION, Version, compute_nodes, header
from corral.spec.cluster import Cluster


def _devices(count: int) -> str:
    return "/dev/nvidia0" if count == 1 else f"/dev/nvidia[0-{count - 1}]"


def render_gres_conf(cluster: Cluster, *, version: Version = DEFAULT_VERSION) -> str:
    """One line per group of GPU nodes with the same GPU model and count.

    AutoDetect=nvml: NVML finds the device files (and cores, links); the line gives the type and
    count to check against (the type must be a substring of the detected name: h100 of
    nvidia_h100_80gb_hbm3). AutoDetect=off: the device files /dev/nvidia0..N-1 are listed.
    """
    nvml = cluster.spec.slurm.gres_autodetect == "nvml"
    groups: dict[tuple[str, int], list[str]] = {}
    for n in compute_nodes(cluster):
        if n.gpus is not None:
            groups.setdefault((n.gpus.model, n.gpus.count), []).append(n.name)
    out = header(cluster, version) + ["AutoDetect=nvml" if nvml else "AutoDetect=off"]
    for (model, count), names in sorted(groups.items(), key=lambda kv: name_key(kv[1][0])):
        where = f"NodeName={hostlist(names)} Name=gpu Type={model}"
        out.append(f"{where} Count={count}" if nvml else f"{where} File={_devices(count)}")
    return "\n".join(out) + "\n"
