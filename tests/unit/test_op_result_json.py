"""OpResult.to_json is written out by hand (engine/results.py: it was hot); it must give what
dataclasses.asdict gave, field for field and in the same order, so journals and --json do not change."""

from __future__ import annotations

import json
from dataclasses import asdict, fields

from corral.engine.handoff import Handoff
from corral.engine.results import NodeResult, OpResult


def _full() -> OpResult:
    return OpResult(name="nvidia | driver 550", status="changed", reason="why", commands=["apt-get install x", "y"],
                    rc=3, stderr_tail="tail", ignored=True, disruption="drain needed", diff="--- a\n+++ b\n",
                    duration_s=1.25, rollout=Handoff("driver", "535", "550"),
                    files=[{"path": "/etc/a", "sha256": "0" * 64, "secret": False, "from_node": False}])


def test_to_json_is_what_asdict_gave_in_the_same_order():
    for op in (_full(), OpResult(name="n", status="unchanged")):
        assert json.dumps(op.to_json()) == json.dumps(asdict(op))
        assert list(op.to_json()) == [f.name for f in fields(OpResult)]


def test_to_json_is_a_copy():
    op = _full()
    data = op.to_json()
    data["commands"].append("more")
    data["rollout"]["new"] = "555"
    assert op.commands == ["apt-get install x", "y"] and op.rollout == Handoff("driver", "535", "550")


def test_a_node_carries_its_ops_json():
    node = NodeResult(node="gpu01", address="10.0.0.1", ops=[_full()])
    assert node.to_json()["ops"] == [asdict(_full())]
