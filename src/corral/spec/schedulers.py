"""The schedulers corral runs, each declared once: the roles its nodes may carry, the spec features
that ride on it, its spec rules and warnings, the version its packages are pinned to, whether the
virtual cluster can run it, and where its components, files, node removal, validation, rollouts
and node control live. Code asks the spec's scheduler (`of(cluster)`) for these instead of comparing its name.

Behaviour lives in other layers, named here as "module:attribute" and imported by `use()` in the
caller's layer (a workflow resolves a workflow, the CLI a check), so this registry stays pure.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from corral.spec.models import K8S_ROLES, SLURM_ROLES


@dataclass(frozen=True)
class Scheduler:
    """One scheduler. `carries`: spec features only it has (slurm-conf: the slurm: section, and what
    DeepOps' Slurm playbook sets; pyxis: a Slurm plugin; topology: Slurm's
    topology.conf; mig-parted: corral installs it, where under Kubernetes the GPU Operator brings its own;
    slurm-exporter: the Prometheus job; software: Lmod on login and compute nodes; images: the registry and podman,
    components of Slurm's list). `pinned`: spec -> the
    version its packages are pinned to (bundle coverage names a bundle holding another). `not_virtual`: why the virtual cluster cannot run it (None:
    it can). `stays_in`: where a node with running jobs must stay (a refused removal's warning)."""

    name: str
    roles: tuple[str, ...]
    carries: frozenset[str]
    rules: tuple[str, ...]  # "module:function" (cluster, where) -> [Problem], run for this scheduler only
    warnings: tuple[str, ...]  # "module:function" (cluster) -> [str]
    pinned: Callable[[Any], str | None]
    not_virtual: str | None
    stays_in: str
    components: str  # "module:COMPONENTS": its declarations, in the order a node runs them
    files: str  # "module:function" (cluster) -> (per node {path: text}, whole-cluster files, notes)
    removal: str  # "module:Class": the steps that take a node out
    validate: str  # "module:function" (cluster, *, jobs, [timeout_s], fabric) -> Report
    rollouts: str  # "module:ROLLOUTS": the rollouts after its components, in order (workflows/node_rollout.py)
    control: str  # "module:function" (cluster, run, policy, clock) -> the NodeControl its rollouts drain with
    after_apply: str  # "module:function" (cluster, result, *, on_event, command, say, backup, rollout_only): apply's last stage

    def use(self, attr: str):
        """The object the declaration names for `attr` (imported now, in the caller's layer)."""
        return self.use_one(getattr(self, attr))

    @staticmethod
    def use_one(ref: str):
        module, _, name = ref.partition(":")
        return getattr(importlib.import_module(module), name)


SLURM = Scheduler(
    name="slurm", roles=SLURM_ROLES,
    carries=frozenset({"slurm-conf", "pyxis", "topology", "mig-parted", "slurm-exporter", "software", "images"}),
    rules=("corral.spec.rules:check_slurm", "corral.spec.rules_ha:check_ha",
           "corral.spec.rules_os:check_slurm_release", "corral.spec.rules_software:check_clean_jobs"),
    warnings=("corral.spec.rules_os:slurm_release_warnings",),
    pinned=lambda spec: spec.slurm.version,
    not_virtual=None,
    stays_in="slurm.conf",
    components="corral.components.slurm:COMPONENTS",
    files="corral.workflows.render_slurm:cluster_files",
    removal="corral.workflows.removal:Removal",
    validate="corral.checks.validate:validate",
    rollouts="corral.workflows.converge:SLURM_ROLLOUTS",
    after_apply="corral.workflows.converge:slurm_after",
    control="corral.workflows.slurm_node:control",
)

KUBERNETES = Scheduler(
    name="kubernetes", roles=K8S_ROLES,
    carries=frozenset(),
    rules=("corral.spec.rules_kubernetes:check_kubernetes",),
    warnings=("corral.spec.rules_kubernetes:kubernetes_warnings",),
    pinned=lambda spec: None,
    not_virtual=("the virtual cluster runs Slurm only: no kubelet can run in its containers and its nodes "
                 "reach no repository but corral's (docs/components/kubernetes.md)"),
    stays_in="the cluster",
    components="corral.components.kubernetes:COMPONENTS",
    files="corral.workflows.render_files:kubernetes_files",
    removal="corral.workflows.k8s_removal:K8sRemoval",
    validate="corral.checks.k8s_validate:validate_kubernetes",
    rollouts="corral.workflows.converge:KUBERNETES_ROLLOUTS",
    after_apply="corral.workflows.converge:kubernetes_after",
    control="corral.workflows.k8s_node:control",
)

SCHEDULERS = {s.name: s for s in (SLURM, KUBERNETES)}


def of(cluster) -> Scheduler:
    """The spec's scheduler (spec.scheduler is one of SCHEDULERS' names: the model's Literal)."""
    return SCHEDULERS[cluster.spec.scheduler]


def problems(cluster, where) -> list:
    """Its own spec rules' problems."""
    s = of(cluster)
    return [p for rule in s.rules for p in s.use_one(rule)(cluster, where)]


def warnings(cluster) -> list[str]:
    """Its own spec warnings."""
    s = of(cluster)
    return [w for rule in s.warnings for w in s.use_one(rule)(cluster)]
