"""GPU emulation for virtual nodes (virtual cluster ONLY, never used on real nodes).

Each declared GPU gets a character device /dev/nvidiaN (195:N; plus /dev/nvidiactl 195:255) made at
every boot by systemd-tmpfiles: open() gives ENXIO (there is no driver), stat() works, and Slurm's
device cgroup can allow or deny it. A stand-in `nvidia-smi` reports the declared model, memory and
count, honours CUDA_VISIBLE_DEVICES and says "emulated".
"""

from __future__ import annotations

import json
import uuid
from importlib import resources
from pathlib import Path

from corral.spec.cluster import Node

# GRES type -> (marketing name nvidia-smi prints, default memory GiB, compute capability)
MODELS = {
    "v100": ("Tesla V100-SXM2-32GB", 32, "7.0"), "t4": ("Tesla T4", 16, "7.5"),
    "a10": ("NVIDIA A10", 24, "8.6"), "a100": ("NVIDIA A100-SXM4-80GB", 80, "8.0"),
    "l4": ("NVIDIA L4", 24, "8.9"), "l40s": ("NVIDIA L40S", 48, "8.9"),
    "h100": ("NVIDIA H100 80GB HBM3", 80, "9.0"), "h200": ("NVIDIA H200", 141, "9.0"),
    "b200": ("NVIDIA B200", 180, "10.0"),
}
TMPFILES = "etc/tmpfiles.d/corral-emulated-gpus.conf"
CONF = "etc/corral/emulated-gpus.json"


def describe(node: Node) -> list[dict]:
    if not node.gpus:
        return []
    name, mem_gib, cc = MODELS.get(node.gpus.model, (f"NVIDIA {node.gpus.model.upper()}", 16, "8.0"))
    mem_gib = node.gpus.memory_gib or mem_gib
    return [{"index": i, "name": name, "memory_mib": mem_gib * 1024, "compute_cap": cc,
             "uuid": "GPU-" + str(uuid.uuid5(uuid.NAMESPACE_DNS, f"{node.name}.gpu{i}.corral")),
             "bus_id": f"00000000:{0x18 + 0x10 * i:02X}:00.0"} for i in range(node.gpus.count)]


def install(node: Node, root: Path) -> None:
    """Write the tmpfiles.d device entries, the GPU description and the stand-in nvidia-smi."""
    gpus = describe(node)
    tmpfiles, conf, smi = root / TMPFILES, root / CONF, root / "usr/bin/nvidia-smi"
    if not gpus:
        for f in (tmpfiles, conf, smi):
            f.unlink(missing_ok=True)
        return
    tmpfiles.parent.mkdir(parents=True, exist_ok=True)
    lines = ["# corral virtual cluster: EMULATED GPU device files (no driver behind them)"]
    lines += [f"c /dev/nvidia{g['index']} 0666 root root - 195:{g['index']}" for g in gpus]
    lines.append("c /dev/nvidiactl 0666 root root - 195:255")
    tmpfiles.write_text("\n".join(lines) + "\n")
    conf.parent.mkdir(parents=True, exist_ok=True)
    conf.write_text(json.dumps({"emulated": True, "model": node.gpus.model, "gpus": gpus}, indent=1) + "\n")
    smi.write_bytes(resources.files("corral.virtual").joinpath("files/nvidia-smi").read_bytes())
    smi.chmod(0o755)
