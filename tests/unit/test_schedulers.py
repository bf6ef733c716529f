"""The scheduler registry (spec/schedulers.py: what each scheduler is) and what each one does, by direct reference
(its rules in spec/rules.py, its components in components/views.py, its flows in workflows/flows.py): every
scheduler has each, code asks them instead of comparing the scheduler's name, and no flow is named by a
"module:attr" string."""

from __future__ import annotations

import re
import typing
from pathlib import Path

import pytest

from corral.spec.models import ClusterSpec, Role
from corral.spec.schedulers import SCHEDULERS

SRC = Path(__file__).resolve().parents[2] / "src" / "corral"
FLOWS = ("files", "removal", "validate", "rollouts", "control", "after_apply")


def _cluster(name: str):
    from types import SimpleNamespace
    return SimpleNamespace(spec=SimpleNamespace(scheduler=name))


def test_the_registry_names_exactly_the_schedulers_the_spec_accepts():
    assert set(SCHEDULERS) == set(typing.get_args(ClusterSpec.model_fields["scheduler"].annotation))


@pytest.mark.parametrize("name", sorted(SCHEDULERS))
def test_every_scheduler_has_its_rules_components_and_flows_and_roles_are_roles(name):
    from corral.components.views import declared
    from corral.spec.rules import SCHEDULER_RULES, SCHEDULER_WARNINGS
    from corral.workflows import flows
    f = flows.of(_cluster(name))
    for attr in FLOWS:
        assert callable(getattr(f, attr)) or isinstance(getattr(f, attr), tuple), (name, attr)
    assert all(callable(rule) for rule in SCHEDULER_RULES[name] + SCHEDULER_WARNINGS[name])
    assert set(s := SCHEDULERS[name].roles) <= set(typing.get_args(Role)), s
    assert declared(_cluster(name))[0].name == "base"  # the shared head first


def test_each_scheduler_brings_its_own_components_rules_and_removal():
    from corral.components.views import declared
    from corral.workflows import flows
    slurm, k8s = SCHEDULERS["slurm"], SCHEDULERS["kubernetes"]
    on_slurm, on_k8s = declared(_cluster("slurm")), declared(_cluster("kubernetes"))
    assert {"slurm controller", "slurm compute"} <= {c.name for c in on_slurm} \
        and not {c.name for c in on_k8s} & {"slurm controller", "slurm compute"}
    assert flows.of(_cluster("slurm")).removal is not flows.of(_cluster("kubernetes")).removal
    assert "pyxis" in slurm.carries and "pyxis" not in k8s.carries
    assert slurm.not_virtual is None and "kubelet" in k8s.not_virtual


def test_no_flow_is_named_by_a_module_attr_string():
    """Deploys, rollouts, stages, rules: referenced, never "module:attr" strings a reader or a tool cannot follow."""
    pattern = re.compile(r"""["']corral\.[a-z_.]+:[A-Za-z_]+["']""")
    found = [f"{p.relative_to(SRC)}:{i}" for p in SRC.rglob("*.py")
             for i, line in enumerate(p.read_text().splitlines(), 1) if pattern.search(line)]
    assert found == [], found


def test_name_comparisons_stay_in_the_registry():
    """At most 3 comparisons of the scheduler's name in src/ (issue 33): new code asks the scheduler."""
    pattern = re.compile(r"scheduler\s*(==|!=)")
    found = [f"{p.relative_to(SRC)}:{i}" for p in SRC.rglob("*.py")
             for i, line in enumerate(p.read_text().splitlines(), 1) if pattern.search(line.split("#")[0])]
    assert len(found) <= 3, found


def test_each_scheduler_names_its_rollouts_and_the_node_control_they_drain_with():
    """converge runs the rollouts the declaration names; a rollout drains through the scheduler's control."""
    from types import SimpleNamespace
    from corral.workflows import converge, flows
    from corral.workflows.k8s_node import KubeControl
    from corral.workflows.node_rollout import NodeRollout
    from corral.workflows.slurm_node import SlurmControl
    slurm, k8s = flows.of(_cluster("slurm")), flows.of(_cluster("kubernetes"))
    assert slurm.rollouts is converge.SLURM_ROLLOUTS and k8s.rollouts is converge.KUBERNETES_ROLLOUTS
    assert all(isinstance(d, NodeRollout) for f in (slurm, k8s) for d in f.rollouts)
    assert [d.what for d in slurm.rollouts] == ["driver rollout", "MIG rollout", "package upgrade", "slurm upgrade"]
    def cluster(role):
        return SimpleNamespace(with_role=lambda r: [SimpleNamespace(name="first")] if r == role else [])
    on_slurm = slurm.control(cluster("controller"), None, None, None)
    on_k8s = k8s.control(cluster("control-plane"), None, None, None)
    assert isinstance(on_slurm, SlurmControl) and on_slurm.controller == "first"
    assert isinstance(on_k8s, KubeControl) and on_k8s.cp == "first"
    assert slurm.control(cluster("login"), None, None, None).controller is None  # no controller: none drained


def test_every_component_is_applied_one_way():
    """A declared component has its deploy in deploy/by_component.py, or gives its resources (the one generic
    deploy): exactly one; and that registry names nothing that is not declared."""
    from corral.components.views import declared
    from corral.deploy.by_component import DEPLOYS
    names = set()
    for scheduler in SCHEDULERS:
        for c in declared(_cluster(scheduler)):
            names.add(c.name)
            assert (c.resources is None) == (c.name in DEPLOYS), c.name
    assert set(DEPLOYS) <= names, set(DEPLOYS) - names
    assert "podman" in names and "podman" not in DEPLOYS  # declared as data
