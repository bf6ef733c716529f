"""The `acceptance:` section: what `corral validate` measures on real GPUs (checks/acceptance*.py) and the
tools `corral apply` builds for it on GPU compute nodes (deploy/acceptance.py): DCGM diagnostics, a
gpu-burn matmul burn judged against a TFLOPS floor per GPU model, and nccl-tests' all_reduce_perf
across the GPUs of each node (docs/components/acceptance.md).

The burn floors: gpu-burn's default mode is FP32 SGEMM on the CUDA cores ("using FLOATS", no tensor
cores), so each default floor is FLOOR_FRACTION of NVIDIA's datasheet FP32 (non-tensor, dense) peak of
the model (spec/gpus.py, the lowest of its form factors): a GPU under it is broken or throttled, not
merely slower than its neighbours. Measure your machines and raise the floor with `floor_tflops`."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, StringConstraints

from corral.spec.gpus import GPU_MODELS
from corral.spec.models_base import GPU_MODEL, SourceUrl, Strict
from corral.spec.models_monitoring import APT_VERSION
from corral.spec.types import Sha256

FLOOR_FRACTION = 0.4
# wilicc/gpu-burn has no releases: a commit ("Support CUDA 13+", 2025-11-04)
GPU_BURN_COMMIT = "671f4be92477ce01cd9b536bc534a006dbee058f"
NCCL_TESTS_VERSION = "2.17.10"  # NVIDIA/nccl-tests tag v2.17.10 (2026-03-05)
ModelKey = Annotated[str, StringConstraints(pattern=GPU_MODEL, max_length=32)]
Tflops = Annotated[float, Field(gt=0, le=100000)]


def default_floors() -> dict[str, float]:
    """GPU model -> corral's default burn floor, TFLOPS: FLOOR_FRACTION of the datasheet FP32 peak."""
    return {m: round(g.fp32_tflops * FLOOR_FRACTION, 1) for m, g in GPU_MODELS.items() if g.fp32_tflops}


SOURCE_SHA = "sha256 of the source tarball (required when enabled on a real cluster), or skip"


class BurnSpec(Strict):
    """gpu-burn (github.com/wilicc/gpu-burn), built with nvcc on each GPU compute node; validate runs it
    on every GPU of a node and judges each GPU's TFLOPS and its compare errors."""

    enabled: bool = Field(default=False, description="build gpu-burn (apply) and run it (validate) on GPU "
                                                     "compute nodes; needs nvidia.cuda_toolkit")
    seconds: int = Field(default=60, ge=10, le=3600, description="how long gpu_burn runs on each node, seconds")
    floor_tflops: dict[ModelKey, Tflops] = Field(
        default={}, description="GPU model -> the least FP32 TFLOPS every GPU of that model must reach "
                                f"(gpu-burn's SGEMM); over corral's defaults, {int(FLOOR_FRACTION * 100)}% of "
                                "NVIDIA's datasheet FP32 peak: " + ", ".join(f"{m} {v:g}" for m, v in
                                                                             default_floors().items()))
    version: str = Field(default=GPU_BURN_COMMIT, pattern=r"^[0-9a-f]{40}$",
                         description="the gpu-burn commit built (the project has no releases)")
    url: SourceUrl = Field(default="https://github.com/wilicc/gpu-burn/archive/{version}.tar.gz",
                           description="source tarball URL template ({version})")
    sha256: Sha256 | Literal["skip"] | None = Field(default=None, description=SOURCE_SHA)


class NcclSpec(Strict):
    """nccl-tests (github.com/NVIDIA/nccl-tests) built with nvcc against libnccl-dev from NVIDIA's CUDA
    repository; validate runs all_reduce_perf over all GPUs of each node (one process, -g N). Across
    nodes it needs an MPI build and launcher, which corral does not deploy (not measured)."""

    enabled: bool = Field(default=False, description="build nccl-tests (apply) and run all_reduce_perf within "
                                                     "each GPU compute node (validate); needs nvidia.cuda_toolkit")
    floor_busbw_gbps: float | None = Field(default=None, gt=0, le=100000,
                                           description="the least all-reduce bus bandwidth within a node, GB/s "
                                                       "(nccl-tests' busbw, the highest over the message sizes); "
                                                       "unset: measured and reported, not judged")
    version: str = Field(default=NCCL_TESTS_VERSION, pattern=r"^\d+\.\d+\.\d+$",
                         description="nccl-tests release (tag v{version})")
    url: SourceUrl = Field(default="https://github.com/NVIDIA/nccl-tests/archive/refs/tags/v{version}.tar.gz",
                           description="source tarball URL template ({version})")
    sha256: Sha256 | Literal["skip"] | None = Field(default=None, description=SOURCE_SHA)
    across_nodes: bool = Field(default=False, description="also build all_reduce_perf with MPI (Debian's Open MPI) and "
                                                          "run it across every GPU compute node in validate (srun "
                                                          "--mpi=pmix, one task per GPU)")
    floor_across_busbw_gbps: float | None = Field(default=None, gt=0, le=100000,
                                                  description="the least all-reduce bus bandwidth across the nodes, "
                                                              "GB/s; unset: measured and reported, not judged")
    nccl_version: str | None = Field(default=None, pattern=APT_VERSION,
                                     description="apt version of libnccl2 and libnccl-dev (NVIDIA's CUDA "
                                                 "repository), e.g. 2.21.5-1+cuda12.4; unset: the newest")


class AcceptanceSpec(Strict):
    """GPU acceptance in `corral validate`, on real GPUs only (skipped on the virtual cluster)."""

    dcgm_diag_level: int = Field(default=1, ge=0, le=3,
                                 description="`dcgmi diag -r LEVEL -j` on each GPU compute node (needs "
                                             "nvidia.dcgm.enabled): 1 quick (about a minute), 2 medium "
                                             "(minutes), 3 long (half an hour and more); 0: not run")
    burn: BurnSpec = Field(default=BurnSpec(), description="matmul burn: TFLOPS per GPU against a floor")
    nccl: NcclSpec = Field(default=NcclSpec(), description="NCCL all-reduce bandwidth within each node")


def burn_floor(burn: BurnSpec, model: str) -> float | None:
    """The TFLOPS floor of a GPU model: the spec's, else corral's default; None: none known."""
    return burn.floor_tflops.get(model, default_floors().get(model))
