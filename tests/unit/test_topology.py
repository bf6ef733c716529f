"""`topology:` (spec/models_topology.py, rules_topology.py) and its rendering (render/topology.py):
topology.conf for a declared tree or blocks, slurm.conf's TopologyPlugin, and every located refusal."""

from __future__ import annotations

import pytest

from corral.errors import CorralError
from corral.render.slurm import render_slurm_conf
from corral.render.slurm_lint import lint_topology_conf
from corral.render.topology import topology_conf
from corral.spec.loader import load
from corral.spec.rules import spec_warnings

BASE = """name: t
nodes:
  - {names: ctl, addresses: [10.0.0.10], roles: [controller]}
  - {names: "gpu[01-04]", addresses: "10.0.0.[11-14]", roles: [compute], gpus: {model: h100, count: 4}}
"""
TREE = """topology:
  switches:
    - {name: spine, switches: [leaf1, leaf2]}
    - {name: leaf1, nodes: "gpu[01-02]"}
    - {name: leaf2, nodes: "gpu[03-04]"}
"""


def spec(tmp_path, text: str):
    f = tmp_path / "cluster.yaml"
    f.write_text(BASE + text)
    return load(f)


def test_a_declared_tree_renders_topology_conf_and_the_plugin(tmp_path):
    c = spec(tmp_path, TREE)
    text = topology_conf(c)
    assert text.splitlines()[2:] == ["SwitchName=spine Switches=leaf[1-2]", "SwitchName=leaf1 Nodes=gpu[01-02]",
                                     "SwitchName=leaf2 Nodes=gpu[03-04]"]
    assert lint_topology_conf(text) == []
    assert "TopologyPlugin=topology/tree" in render_slurm_conf(c, {}, version=(22, 5)).splitlines()
    plain = spec(tmp_path, "")
    assert topology_conf(plain) is None and "TopologyPlugin" not in render_slurm_conf(plain, {}, version=(22, 5))


def test_blocks_need_slurm_23_11(tmp_path):
    blocks = "topology:\n  blocks:\n    - {name: nvl1, nodes: 'gpu[01-02]'}\n    - {name: nvl2, nodes: 'gpu[03-04]'}\n"
    with pytest.raises(CorralError, match=r"cluster.yaml:\d+:\d+: topology/block needs Slurm 23.11 "
                                          r"or later; this cluster runs an unpinned Slurm .*pin slurm.version"):
        spec(tmp_path, blocks)
    with pytest.raises(CorralError, match="this cluster runs Slurm 22.05"):
        spec(tmp_path, blocks + "slurm: {version: '22.05'}\n")
    c = spec(tmp_path, blocks + "slurm: {version: '23.11'}\n")
    assert topology_conf(c).splitlines()[2:] == ["BlockName=nvl1 Nodes=gpu[01-02]", "BlockName=nvl2 Nodes=gpu[03-04]"]
    assert "TopologyPlugin=topology/block" in render_slurm_conf(c, {}, version=(23, 11))
    with pytest.raises(CorralError, match="the controller runs 23.02"):  # the facts disagree with the pin
        render_slurm_conf(c, {}, version=(23, 2))


@pytest.mark.parametrize("text, message", [
    (TREE.replace("leaf2]}", "leaf3]}"), "no switch is named 'leaf3'"),
    (TREE.replace('"gpu[03-04]"', '"gpu[02-04]"'), "9:28: gpu02 is already under leaf1"),
    (TREE.replace('"gpu[03-04]"', '"gpu[03-05]"'), "9:28: gpu05 is not a compute node"),
    (TREE.replace('"gpu[03-04]"', '"ctl"'), "9:28: ctl is not a compute node"),
    (TREE.replace('"gpu[03-04]"', '"gpu03"'), r"7:5: 1 compute node\(s\) are under no switch: gpu04"),
    (TREE.replace("leaf2, nodes", "leaf1, nodes"), "9:14: 'leaf1' is named twice"),
    (TREE + "    - {name: other, switches: [leaf1]}\n", "'leaf1' is already a child of 'spine'"),
    (TREE.replace("{name: spine, switches: [leaf1, leaf2]}", "{name: spine, switches: [leaf1, leaf2]}\n"
                  "    - {name: x, switches: [y]}\n    - {name: y, switches: [x]}"), "the switches form a loop: x -> y -> x"),
    ("topology:\n  switches:\n    - {name: leaf1}\n", "switch 'leaf1' has neither nodes nor switches"),
    ("topology:\n  switches: []\n", "give switches .topology/tree., blocks .topology/block. or discover"),
    ('topology:\n  switches:\n    - {name: "leaf 1", nodes: gpu01}\n', "topology.switches.0.name: not a name of lowercase"),
    ('topology:\n  switches:\n    - {name: leaf1, nodes: "gpu01\\nPrologSlurmctld=/x"}\n', "topology.switches.0.nodes: does not have the expected form"),
])
def test_refusals_are_located(tmp_path, text, message):
    with pytest.raises(CorralError) as e:
        spec(tmp_path, text)
    assert any(__import__("re").search(message, line) for line in str(e.value).splitlines()), str(e.value)


def test_a_loop_is_refused_and_two_tops_warned(tmp_path):
    loop = ("topology:\n  switches:\n    - {name: a, switches: [b], nodes: 'gpu[01-04]'}\n"
            "    - {name: b, switches: [a]}\n")
    with pytest.raises(CorralError, match="the switches form a loop: a -> b -> a"):
        spec(tmp_path, loop)
    two = "topology:\n  switches:\n    - {name: leaf1, nodes: 'gpu[01-02]'}\n    - {name: leaf2, nodes: 'gpu[03-04]'}\n"
    assert spec_warnings(spec(tmp_path, two)) == [
        "topology: 2 top switches (leaf1, leaf2): Slurm gives no job nodes under two of them"]


def test_route_along_the_tree(tmp_path):
    routed = spec(tmp_path, TREE.replace("topology:\n", "topology:\n  route: true\n"))
    assert "RoutePlugin=route/topology" in render_slurm_conf(routed, {}, version=(22, 5)).splitlines()
    newer = render_slurm_conf(routed, {}, version=(23, 11)).splitlines()
    assert "TopologyParam=RouteTree" in newer and not any(ln.startswith("RoutePlugin") for ln in newer)
    two = "topology:\n  route: true\n  switches:\n    - {name: leaf1, nodes: 'gpu[01-02]'}\n    - {name: leaf2, nodes: 'gpu[03-04]'}\n"
    with pytest.raises(CorralError, match="routing along the topology needs switches under one top"):
        spec(tmp_path, two)


def test_a_discovered_fabric_with_nodes_off_it_is_not_routed(tmp_path):
    from pathlib import Path
    from corral.render.topology import discovery_warnings
    fixture = Path(__file__).resolve().parents[1] / "fixtures" / "fabric" / "virtual.txt"
    f = tmp_path / "cluster.yaml"
    f.write_text(BASE.replace("gpu[01-04]", "gpu[01-05]").replace("10.0.0.[11-14]", "10.0.0.[11-15]")
                 + f"topology: {{discover: infiniband, route: true, ibnetdiscover_file: {fixture}}}\n")
    c = load(f)
    assert "RoutePlugin" not in render_slurm_conf(c, {}, version=(22, 5))
    assert any(w.startswith("topology.route: not set in slurm.conf") for w in discovery_warnings(c, {}))
