"""`apply --rollout-only NODES` and MIG (issue 54): a node outside the chosen ones whose MIG layout differs
is left as it is. Its mig component plans one op saying "not in this rollout" (unchanged, not a change
handed to the rollout), writes neither the mig-parted config nor the boot-time unit and enables nothing;
the run warns once for those nodes. The vcluster half: tests/vcluster/test_mig.py."""

from __future__ import annotations

from corral.deploy.mig import mig
from corral.engine import run_context
from corral.engine.results import NodeResult, OpResult, RunResult
from corral.engine.run_context import NOT_IN_ROLLOUT, RunContext
from corral.facts.records import NodeHW
from corral.render.mig import held_back
from corral.spec.loader import load_text
from corral.workflows import node_rollout
from tests.unit.deploy_ops import planned_ops
from tests.unit.test_mig import SPEC as ONE

# test_mig's spec on two nodes, one MIG layout on GPU 0 only
SPEC = ONE.replace("  - names: gpu01\n    addresses: [10.0.0.11]\n", "  - names: gpu[01-02]\n    addresses: 10.0.0.11-10.0.0.12\n") \
    .replace('        - {gpus: "1-2", profiles: [1g.10gb, 1g.10gb, 1g.10gb, 1g.10gb, 1g.10gb, 1g.10gb, 1g.10gb]}\n', "")

WHOLE = NodeHW(16, 1, 16, 1, 64000)  # facts of a node without MIG devices


def test_only_nodes_outside_the_chosen_ones_are_outside_the_rollout():
    assert not RunContext().outside_rollout("gpu02")  # no --rollout-only: every node is in
    ctx = RunContext(rollout_only=frozenset({"gpu01"}))
    assert not ctx.outside_rollout("gpu01") and ctx.outside_rollout("gpu02")


def test_a_differing_layout_is_held_back_only_outside_the_rollout():
    gpus = load_text(SPEC, "cluster.yaml").node("gpu02").gpus
    assert held_back(gpus, WHOLE, outside=False) is None  # chosen: deployed, handed to the rollout
    reason = held_back(gpus, WHOLE, outside=True)
    assert reason is not None and reason.startswith("GPU 0: whole -> 4g.40gb+3g.40gb; ")
    assert "corral-mig.service" in reason
    unmanaged = SPEC.replace('      mig:\n        - {gpus: "0", profiles: [3g.40gb, 4g.40gb]}\n', "")
    assert held_back(load_text(unmanaged, "cluster.yaml").node("gpu02").gpus, WHOLE, outside=True) is None


def _planned(tmp_path, chosen):
    ctx = RunContext(mode="plan", rollout_only=chosen, hw={"gpu01": WHOLE, "gpu02": WHOLE})
    with run_context.active(ctx):
        return planned_ops(tmp_path, SPEC, [mig])


def test_the_mig_component_leaves_a_node_outside_the_rollout_as_it_is(tmp_path):
    every = _planned(tmp_path, None)
    ops = _planned(tmp_path, frozenset({"gpu01"}))
    assert ops["gpu01"] == every["gpu01"] == every["gpu02"]  # chosen: config, unit, enabled, the layout
    assert any("corral-mig.service" in o for o in every["gpu02"]) and "mig | corral-mig enabled" in every["gpu02"]
    assert ops["gpu02"] == ["mig | MIG layout"]  # the skip: nothing written, nothing enabled
    assert ops["ctl"] == every["ctl"] == []


def test_the_run_names_the_ops_it_held_back_and_their_nodes():
    def node(name, reason):
        return NodeResult(node=name, address="a", ops=[
            OpResult(name="mig | MIG layout", status="unchanged", reason=reason)])
    result = RunResult(run_id="r", command="apply", mode="apply", spec_hash="x", started="t", nodes={
        "gpu01": node("gpu01", "MIG layout as the spec says"),
        "gpu02": node("gpu02", f"skipped: {NOT_IN_ROLLOUT}: GPU 0: whole -> 3g.40gb"),
        "gpu03": node("gpu03", f"skipped: {NOT_IN_ROLLOUT}: GPU 1: whole -> 3g.40gb")})
    assert node_rollout.held_back(result) == {"mig | MIG layout": ["gpu02", "gpu03"]}
    assert node_rollout.pending(result, "mig") == []  # not a change: the MIG rollout gets none of them
