"""The rollout policy in force (`rollout:`, or the deprecated `nvidia.rollout:` of older specs)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from corral.errors import Problem
from corral.spec.models_rollout import RolloutPolicy

if TYPE_CHECKING:
    from corral.spec.cluster import Cluster
    from corral.spec.models import ClusterSpec

OLD = {"parallel": "batch", "drain_timeout_s": "drain_timeout", "reboot_timeout_s": "reboot_timeout"}


def policy(spec: ClusterSpec) -> RolloutPolicy:
    """`rollout:`, with the values an older spec set in `nvidia.rollout:` carried over."""
    old = {OLD[k]: getattr(spec.nvidia.rollout, k) for k in spec.nvidia.rollout.model_fields_set
           if getattr(spec.nvidia.rollout, k) is not None}
    return spec.rollout.model_copy(update=old) if old else spec.rollout


def check_rollout(cluster: Cluster, where) -> list[Problem]:
    spec = cluster.spec
    if spec.nvidia.rollout.model_fields_set and "rollout" in spec.model_fields_set:
        return [Problem(where(("nvidia", "rollout")), "the rollout policy is set twice: in `rollout:` and in "
                        "the older `nvidia.rollout:`", ", ".join(sorted(spec.nvidia.rollout.model_fields_set)),
                        "keep `rollout:` only (nvidia.rollout.parallel -> rollout.batch, drain_timeout_s -> "
                        "drain_timeout, reboot_timeout_s -> reboot_timeout)")]
    return []


def rollout_warnings(cluster: Cluster) -> list[str]:
    old = sorted(cluster.spec.nvidia.rollout.model_fields_set)
    if not old:
        return []
    return [f"nvidia.rollout ({', '.join(old)}) is deprecated and used as `rollout:` "
            f"({', '.join(OLD[k] for k in old)}); canary and max_failed take their defaults: move it to `rollout:`"]
