"""What each scheduler does past its components, by direct reference: the files `corral render` writes, the steps
that take a node out, `corral validate`, the rollouts after its components, the NodeControl they drain with, and
apply's last stage (spec/schedulers.py keeps what each scheduler *is*; its spec rules are in spec/rules.py, its
components in components/views.py). The imports are here, inside `of`, so that the modules named may themselves
import this one."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Flows:
    files: Callable[..., Any]        # (cluster) -> (per node {path: text}, whole-cluster files, notes)
    removal: type                    # the steps that take a node out
    validate: Callable[..., Any]     # (cluster, *, jobs, [timeout_s], fabric) -> Report
    rollouts: tuple                  # the rollouts after its components, in order (workflows/node_rollout.py)
    control: Callable[..., Any]      # (cluster, run, policy, clock) -> the NodeControl its rollouts drain with
    after_apply: Callable[..., Any]  # (cluster, result, *, on_event, command, say, backup, rollout_only): apply's last


def of(cluster) -> Flows:
    """The spec's scheduler's flows."""
    from corral.checks.k8s_validate import validate_kubernetes
    from corral.checks.validate import validate
    from corral.workflows import converge, k8s_node, slurm_node
    from corral.workflows.k8s_removal import K8sRemoval
    from corral.workflows.removal import Removal
    from corral.workflows.render_kubernetes import kubernetes_files
    from corral.workflows.render_slurm import cluster_files
    return {
        "slurm": Flows(files=cluster_files, removal=Removal, validate=validate, rollouts=converge.SLURM_ROLLOUTS,
                       control=slurm_node.control, after_apply=converge.slurm_after),
        "kubernetes": Flows(files=kubernetes_files, removal=K8sRemoval, validate=validate_kubernetes,
                            rollouts=converge.KUBERNETES_ROLLOUTS, control=k8s_node.control,
                            after_apply=converge.kubernetes_after),
    }[cluster.spec.scheduler]
