"""The gather hook reads a node's hardware and its snapshot in one command (deploy/context.py):
one round trip fewer per node and run (the parse: tests/facts/HardwareAndState)."""

from __future__ import annotations

import json
from pathlib import Path

from corral.deploy.context import SPLIT, HardwareAndState
from corral.facts.hardware import NodeHardware
from corral.deploy.nodestate import NodeState

CASE = json.loads((Path(__file__).parents[1] / "facts" / "NodeHardware" / "cpu_node_without_hooks.json").read_text())


def test_one_command_holds_both_facts_commands():
    command = HardwareAndState().command(paths=("/etc/slurm/slurm.conf",), services=("slurmd",),
                                         packages=("slurm-client",))
    hw = NodeHardware().command()
    state = NodeState().command(paths=("/etc/slurm/slurm.conf",), services=("slurmd",), packages=("slurm-client",))
    assert command == f"{{ {hw}; }}; echo {SPLIT}; {state}"


def test_no_marker_no_snapshot_lines():
    """Output cut before the marker (never expected): the hardware parsed, an empty snapshot."""
    hw, snap = HardwareAndState().process(CASE["output"])
    assert hw.cpus == 8 and snap.packages == {} and snap.files == {}
