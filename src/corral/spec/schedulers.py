"""The schedulers corral runs, each declared once: the roles its nodes may carry, the spec features
that ride on it, the version its packages are pinned to, whether the virtual cluster can run it. Code asks
the spec's scheduler (`of(cluster)`) for these instead of comparing its name.

What each one does is in the layer that does it, by direct reference: its spec rules in spec/rules.py
(SCHEDULER_RULES), its components in components/views.py, its files, removal, validation, rollouts, node
control and apply's last stage in workflows/flows.py.
"""

from __future__ import annotations

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
    pinned: Callable[[Any], str | None]
    not_virtual: str | None
    stays_in: str


SLURM = Scheduler(
    name="slurm", roles=SLURM_ROLES,
    carries=frozenset({"slurm-conf", "pyxis", "topology", "mig-parted", "slurm-exporter", "software", "images"}),
    pinned=lambda spec: spec.slurm.version,
    not_virtual=None,
    stays_in="slurm.conf",
)

KUBERNETES = Scheduler(
    name="kubernetes", roles=K8S_ROLES,
    carries=frozenset(),
    pinned=lambda spec: None,
    not_virtual=("the virtual cluster runs Slurm only: no kubelet can run in its containers and its nodes "
                 "reach no repository but corral's (docs/components/kubernetes.md)"),
    stays_in="the cluster",
)

SCHEDULERS = {s.name: s for s in (SLURM, KUBERNETES)}


def of(cluster) -> Scheduler:
    """The spec's scheduler (spec.scheduler is one of SCHEDULERS' names: the model's Literal)."""
    return SCHEDULERS[cluster.spec.scheduler]
