"""slurm.version on the shared virtual cluster (its repository has one Slurm, Debian 12's 22.05.8, so
no upgrade can run here; tests/unit/test_slurm_upgrade.py shows the upgrade's order on a scripted
cluster): the pin planned as a change with disruption none on every Slurm node, in place after apply
and honoured by apt, a second apply with nothing to change for it; a jump Slurm does not support and a
downgrade refused as each node's error naming slurm.version, with nothing changed. Removes its pin
at the end (the shared cluster as it was)."""

from __future__ import annotations

import pytest

from corral.errors import SpecError
from ruamel.yaml import YAML

from corral.render.slurm_pin import PIN
from corral.spec.loader import load
from corral.workflows.converge import converge
from tests.vcluster.conftest import settled, ssh

pytestmark = pytest.mark.vcluster
OP = "slurm version | Slurm version pinned"  # the runner names an op "<deploy> | <op>"


def with_version(vc, version: str):
    """The shared cluster's spec with slurm.version set, beside it (same state dir)."""
    yaml = YAML()
    data = yaml.load(vc.cluster.path.read_text())
    data.setdefault("slurm", {})["version"] = version
    path = vc.cluster.path.with_name(f"slurm-version-{version}.yaml")
    with path.open("w") as f:
        yaml.dump(data, f)
    return load(path)


def pin_ops(result):
    return {name: [o for o in n.ops if o.name == OP] for name, n in result.nodes.items()}


@pytest.fixture(scope="module")
def vc(shared_cluster):
    settled(shared_cluster, "test-slurm-version-apply")
    yield shared_cluster
    for node in shared_cluster.cluster.nodes:
        ssh(shared_cluster, node.name, f"rm -f {PIN}", check=False)


def test_the_pin_planned_applied_honoured_and_then_nothing(vc):
    cluster = with_version(vc, "22.05")
    plan = converge(cluster, "plan", command="test-slurm-version-plan")
    ops = pin_ops(plan)
    assert plan.ok and all(ops.values()), ops
    assert {(o.status, o.disruption) for found in ops.values() for o in found} == {("changed", "none")}
    assert not [r for r in plan.rollouts if r["what"] == "slurm upgrade"]
    applied = converge(cluster, "apply", command="test-slurm-version-apply")
    assert applied.ok, [n.error for n in applied.nodes.values() if n.error]
    known = {n.name for n in vc.cluster.nodes}  # test_slurm added gpu03 to the spec file, not to this object
    for node in [n for n in ops if n in known]:
        assert "Pin: version 22.05.*" in ssh(vc, node, f"cat {PIN}").stdout
        policy = ssh(vc, node, "apt-cache policy slurm-client").stdout
        assert "1001" in policy and "22.05.8" in policy, policy
    again = converge(cluster, "apply", command="test-slurm-version-again")
    assert again.ok
    assert {(o.status, o.reason) for found in pin_ops(again).values() for o in found} == {
        ("unchanged", "Slurm 22.05.8 pinned at 22.05")}


def test_a_version_older_than_the_release_ships_is_a_located_spec_error(vc):
    """21.08 on debian-12 (bookworm ships 22.05): refused when the spec is read, before any node is reached
    (the plan-time downgrade refusal is for a node running a newer Slurm than a version its release has)."""
    with pytest.raises(SpecError, match=r"slurm-version-21\.08\.yaml:\d+:\d+: Slurm 21\.08 cannot run on debian-12"
                                        r".*fix: set slurm\.version to 22\.05 or later"):
        with_version(vc, "21.08")


@pytest.mark.parametrize("version,said", [
    ("24.05", "Slurm upgrades at most 2 major releases at a time (22.05 -> 23.11 -> 24.05)"),
    ("24.11", "Slurm upgrades at most 2 major releases at a time (22.05 -> 23.11 -> 24.11)")])
def test_refused_on_every_slurm_node_before_anything_changes(vc, version, said):
    cluster = with_version(vc, version)
    plan = converge(cluster, "plan", command="test-slurm-version-refused")
    nodes = [n for n, found in pin_ops(plan).items() if found or plan.nodes[n].error]
    assert nodes and all(said in (plan.nodes[n].error or "") and "slurm.version" in plan.nodes[n].error
                         for n in nodes), {n: plan.nodes[n].error for n in nodes}
    assert not [r for r in plan.rollouts if r["what"] == "slurm upgrade"]
