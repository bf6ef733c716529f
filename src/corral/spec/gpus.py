"""Known NVIDIA GPU models (data): GRES type -> name, generation, memory, compute capability.

The GRES type (`gpus.model` in the spec) is lowercase. Features in slurm.conf come from here
(model and generation), and so do the emulated GPUs of the virtual cluster.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class GpuModel:
    name: str            # what nvidia-smi prints
    generation: str      # architecture generation, a Slurm node Feature
    memory_gib: int
    compute_cap: str


GPU_MODELS: dict[str, GpuModel] = {
    "v100": GpuModel("Tesla V100-SXM2-32GB", "volta", 32, "7.0"),
    "t4": GpuModel("Tesla T4", "turing", 16, "7.5"),
    "a10": GpuModel("NVIDIA A10", "ampere", 24, "8.6"),
    "a100": GpuModel("NVIDIA A100-SXM4-80GB", "ampere", 80, "8.0"),
    "l4": GpuModel("NVIDIA L4", "ada", 24, "8.9"),
    "l40s": GpuModel("NVIDIA L40S", "ada", 48, "8.9"),
    "h100": GpuModel("NVIDIA H100 80GB HBM3", "hopper", 80, "9.0"),
    "h200": GpuModel("NVIDIA H200", "hopper", 141, "9.0"),
    "b200": GpuModel("NVIDIA B200", "blackwell", 180, "10.0"),
}


def gpu_model(model: str) -> GpuModel | None:
    return GPU_MODELS.get(model)


def generation(model: str) -> str | None:
    m = GPU_MODELS.get(model)
    return m.generation if m else None
