"""Cross-field checks of `acceptance:` (pure, before any SSH). Errors: the burn and nccl-tests are built
with nvcc, so they need nvidia.cuda_toolkit; a burn floor for a GPU model no compute node has (a
misspelt model, `h100s`, would silently leave the real model at its default floor: an error, not a
warning). Warnings: a GPU model the burn has no floor for (measured, not judged), nccl without a
floor, DCGM diagnostics asked for while DCGM is not deployed (validate skips them, saying so)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from corral.errors import Problem
from corral.spec.models_acceptance import burn_floor

if TYPE_CHECKING:
    from corral.spec.cluster import Cluster

Where = Callable[..., str]


def gpu_models(cluster: Cluster) -> set[str]:
    """The GPU models of the spec's GPU compute nodes."""
    return {n.gpus.model for n in cluster.nodes if n.gpu_count and "compute" in n.roles}


def check_acceptance(cluster: Cluster, where: Where) -> list[Problem]:
    acc, problems = cluster.spec.acceptance, []
    for key, tool in (("burn", acc.burn), ("nccl", acc.nccl)):
        if tool.enabled and cluster.spec.nvidia.cuda_toolkit is None:
            problems.append(Problem(where(("acceptance", key, "enabled")),
                                    f"acceptance.{key} is built with nvcc: it needs nvidia.cuda_toolkit", True,
                                    f"add nvidia.cuda_toolkit: {{version: \"12.4\"}} (or acceptance.{key}.enabled: false)"))
    models = gpu_models(cluster)
    for model in acc.burn.floor_tflops:
        if model not in models:
            problems.append(Problem(where(("acceptance", "burn", "floor_tflops", model)),
                                    "a burn floor for a GPU model no compute node has", model,
                                    f"name a model of the spec's nodes: {', '.join(sorted(models)) or '(none)'}"))
    return problems


def acceptance_warnings(cluster: Cluster) -> list[str]:
    """What validate will measure but not judge, or not run, and why."""
    acc, out = cluster.spec.acceptance, []
    if cluster.spec.virtual is not None:
        return out
    if acc.burn.enabled:
        out += [f"acceptance.burn: no TFLOPS floor for GPU model {m}: measured, not judged "
                f"(set acceptance.burn.floor_tflops.{m})" for m in sorted(gpu_models(cluster))
                if burn_floor(acc.burn, m) is None]
    if acc.nccl.enabled and acc.nccl.floor_busbw_gbps is None:
        out.append("acceptance.nccl: no floor_busbw_gbps: the all-reduce bandwidth is measured, not judged")
    if acc.dcgm_diag_level and not cluster.spec.nvidia.dcgm.enabled and gpu_models(cluster):
        out.append(f"acceptance.dcgm_diag_level: {acc.dcgm_diag_level} but nvidia.dcgm.enabled is false: "
                   "validate skips the DCGM diagnostics")
    return out
