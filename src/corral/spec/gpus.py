"""Known NVIDIA GPU models (data): GRES type -> name, generation, memory, compute capability.

The GRES type (`gpus.model` in the spec) is lowercase. Features in slurm.conf come from here
(model and generation), and so do the emulated GPUs of the virtual cluster. `fp32_tflops` is NVIDIA's
datasheet FP32 (CUDA-core, non-tensor, dense) peak of the model, the lowest of its form factors (PCIe
or NVL below SXM); validate's burn floors derive from it (spec/models_acceptance.py). None: no
datasheet figure checked in.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class GpuModel:
    name: str            # what nvidia-smi prints
    generation: str      # architecture generation, a Slurm node Feature
    memory_gib: int
    compute_cap: str
    fp32_tflops: float | None = None


GPU_MODELS: dict[str, GpuModel] = {
    "v100": GpuModel("Tesla V100-SXM2-32GB", "volta", 32, "7.0", 14.0),   # V100 PCIe 14, SXM2 15.7
    "t4": GpuModel("Tesla T4", "turing", 16, "7.5", 8.1),
    "a10": GpuModel("NVIDIA A10", "ampere", 24, "8.6", 31.2),
    "a100": GpuModel("NVIDIA A100-SXM4-80GB", "ampere", 80, "8.0", 19.5),  # PCIe and SXM4 alike
    "l4": GpuModel("NVIDIA L4", "ada", 24, "8.9", 30.3),
    "l40s": GpuModel("NVIDIA L40S", "ada", 48, "8.9", 91.6),
    "h100": GpuModel("NVIDIA H100 80GB HBM3", "hopper", 80, "9.0", 51.0),  # H100 PCIe 51, SXM5 67
    "h200": GpuModel("NVIDIA H200", "hopper", 141, "9.0", 60.0),         # H200 NVL 60, SXM 67
    "b200": GpuModel("NVIDIA B200", "blackwell", 180, "10.0"),                # no FP32 figure checked in
}


def gpu_model(model: str) -> GpuModel | None:
    return GPU_MODELS.get(model)


def generation(model: str) -> str | None:
    m = GPU_MODELS.get(model)
    return m.generation if m else None
