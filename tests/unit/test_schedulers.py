"""The scheduler registry (spec/schedulers.py): each scheduler declared once, every reference it makes
resolves, and code asks it instead of comparing the scheduler's name."""

from __future__ import annotations

import re
import typing
from pathlib import Path

import pytest

from corral.spec import schedulers
from corral.spec.models import ClusterSpec, Role
from corral.spec.schedulers import SCHEDULERS

SRC = Path(__file__).resolve().parents[2] / "src" / "corral"
REFS = ("components", "files", "removal", "validate", "rollouts", "control", "after_apply")


def test_the_registry_names_exactly_the_schedulers_the_spec_accepts():
    assert set(SCHEDULERS) == set(typing.get_args(ClusterSpec.model_fields["scheduler"].annotation))


@pytest.mark.parametrize("name", sorted(SCHEDULERS))
def test_every_reference_resolves_and_roles_are_roles(name):
    s = SCHEDULERS[name]
    for attr in REFS:
        assert callable(s.use(attr)) or isinstance(s.use(attr), tuple), (name, attr)
    for ref in s.rules + s.warnings:
        assert callable(s.use_one(ref)), ref
    assert set(s.roles) <= set(typing.get_args(Role))
    assert s.use("components")[0].name == "base"  # the shared head first


def test_each_scheduler_brings_its_own_components_rules_and_removal():
    slurm, k8s = SCHEDULERS["slurm"], SCHEDULERS["kubernetes"]
    assert {"slurm controller", "slurm compute"} <= {c.name for c in slurm.use("components")} \
        and not {c.name for c in k8s.use("components")} & {"slurm controller", "slurm compute"}
    assert slurm.use("removal") is not k8s.use("removal")
    assert "pyxis" in slurm.carries and "pyxis" not in k8s.carries
    assert slurm.not_virtual is None and "kubelet" in k8s.not_virtual


def test_name_comparisons_stay_in_the_registry():
    """At most 3 comparisons of the scheduler's name in src/ (issue 33): new code asks the scheduler."""
    pattern = re.compile(r"scheduler\s*(==|!=)")
    found = [f"{p.relative_to(SRC)}:{i}" for p in SRC.rglob("*.py")
             for i, line in enumerate(p.read_text().splitlines(), 1) if pattern.search(line.split("#")[0])]
    assert len(found) <= 3, found


def test_each_scheduler_names_its_rollouts_and_the_node_control_they_drain_with():
    """converge runs the rollouts the declaration names; a rollout drains through the scheduler's control."""
    from types import SimpleNamespace
    from corral.workflows import converge
    from corral.workflows.k8s_node import KubeControl
    from corral.workflows.node_rollout import NodeRollout
    from corral.workflows.slurm_node import SlurmControl
    slurm, k8s = SCHEDULERS["slurm"], SCHEDULERS["kubernetes"]
    assert slurm.use("rollouts") is converge.SLURM_ROLLOUTS and k8s.use("rollouts") is converge.KUBERNETES_ROLLOUTS
    assert all(isinstance(d, NodeRollout) for s in SCHEDULERS.values() for d in s.use("rollouts"))
    assert [d.what for d in slurm.use("rollouts")] == ["driver rollout", "MIG rollout", "package upgrade",
                                                       "slurm upgrade"]
    def cluster(role):
        return SimpleNamespace(with_role=lambda r: [SimpleNamespace(name="first")] if r == role else [])
    on_slurm = slurm.use("control")(cluster("controller"), None, None, None)
    on_k8s = k8s.use("control")(cluster("control-plane"), None, None, None)
    assert isinstance(on_slurm, SlurmControl) and on_slurm.controller == "first"
    assert isinstance(on_k8s, KubeControl) and on_k8s.cp == "first"
    assert slurm.use("control")(cluster("login"), None, None, None).controller is None  # no controller: none drained
