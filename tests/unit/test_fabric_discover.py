"""ibnetdiscover's output (facts/ibnetdiscover.py) and the topology derived from it
(render/topology_discover.py, render/topology.py) on the fixtures of tests/fixtures/fabric/ (synthesized
in rdma-core's exact output format: see make_fixtures.py); the golden topology.conf files are
tests/golden/render/fabric_*/ (test_render_golden.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from corral.errors import CorralError
from corral.facts.ibnetdiscover import parse
from corral.render.slurm import render_slurm_conf
from corral.render.topology import discovery_warnings, topology_conf
from corral.render.topology_discover import discover, switch_name
from corral.spec.loader import load

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "fabric"
SPEC = """name: t
nodes:
  - {names: ctl, addresses: [10.0.0.10], roles: [controller]}
  - {names: "gpu[01-04]", addresses: "10.0.0.[11-14]", roles: [compute]}
topology: {discover: infiniband}
"""


def test_the_parser_reads_switches_hcas_and_links():
    fabric = parse((FIXTURES / "fat_tree.txt").read_text())
    assert len(fabric.of("switch")) == 6 and len(fabric.of("ca")) == 17
    leaf = next(n for n in fabric.of("switch") if "leaf01" in n.desc)
    hosts = sorted(fabric.nodes[link.remote].host for link in leaf.links.values() if link.remote_kind == "ca")
    assert hosts == ["gpu01", "gpu02", "gpu03", "gpu04"]
    uplinks = [link for link in leaf.links.values() if link.remote_kind == "switch"]
    assert len(uplinks) == 4 and {link.rate for link in leaf.links.values()} == {"4xNDR"}
    assert sorted(c.host for c in fabric.of("ca"))[6] == "gpu07"  # "gpu07.cluster.example.com mlx5_0"
    rail = parse((FIXTURES / "rail.txt").read_text())
    dgx01 = [c for c in rail.of("ca") if c.host == "dgx01"]
    assert len(dgx01) == 8 and len({next(iter(c.links.values())).remote for c in dgx01}) == 8


def test_grouping_marks_are_read_and_garbage_is_refused():
    text = (FIXTURES / "virtual.txt").read_text()
    grouped = text.replace("[1]\t\"S-", "[1][ext 1]\t\"S-", 1) + "\nChassis 1 (guid 0x1)\n"
    assert len(parse(grouped).nodes) == len(parse(text).nodes)
    with pytest.raises(CorralError, match="ibnetdiscover output line 3 is not understood"):
        parse("#\n#\nibwarn: [1234] mad_rpc: _do_madrpc failed\n")
    with pytest.raises(CorralError, match="names no switch or HCA"):
        parse("#\n# Topology file: generated on ...\n")


def test_switch_names_from_descriptions():
    assert switch_name("MF0;leaf01:MQM9700/U1", "abcdef0123456789") == "leaf01"
    assert switch_name("Leaf 7 SX6036", "abcdef0123456789") == "leaf"
    assert switch_name("", "abcdef0123456789") == "sw-23456789"
    assert switch_name('MF0;$(reboot)`x`:Q/U1', "abcdef0123456789") == "reboot-x"


def test_the_virtual_fabric_and_what_is_amiss(tmp_path):
    fabric = parse((FIXTURES / "virtual.txt").read_text())
    d = discover(fabric, ["gpu01", "gpu02", "gpu03", "gpu05"])
    assert [(s.name, s.nodes, s.switches) for s in d.switches] == [
        ("leaf01", "gpu01,gpu02", []), ("leaf02", "gpu03", []), ("spine", None, ["leaf01", "leaf02"])]
    assert (d.missing, d.extra) == (["gpu05"], ["gpu04"])
    f = tmp_path / "cluster.yaml"
    f.write_text(SPEC)
    cluster = load(f)
    outputs = {"gpu01": (FIXTURES / "virtual.txt").read_text()}
    text = topology_conf(cluster, outputs)
    assert text.splitlines()[2] == "# discovered from ibnetdiscover on gpu01"
    assert [ln for ln in text.splitlines() if not ln.startswith("#")] == [
        "SwitchName=leaf01 Nodes=gpu[01-02]", "SwitchName=leaf02 Nodes=gpu[03-04]", "SwitchName=spine Switches=leaf[01-02]"]
    assert "TopologyPlugin=topology/tree" in render_slurm_conf(cluster, {}, fabric=outputs)
    assert discovery_warnings(cluster, outputs) == []


def test_nothing_discovered_yet_renders_no_topology(tmp_path):
    f = tmp_path / "cluster.yaml"
    f.write_text(SPEC)
    cluster = load(f)
    assert topology_conf(cluster, {}) is None and "Topology" not in render_slurm_conf(cluster, {}, fabric={})
    assert discovery_warnings(cluster, {})[0].startswith("topology.discover: nothing discovered yet")
    from corral.components.views import package_reasons
    assert package_reasons(cluster)["infiniband-diags"] == ["topology.discover"]


def test_discover_spec_rules(tmp_path):
    f = tmp_path / "cluster.yaml"
    f.write_text(SPEC.replace("{discover: infiniband}", "{discover: infiniband, ibnetdiscover_file: fabric.txt}"))
    with pytest.raises(CorralError, match=r"cluster.yaml:5:\d+: .*fabric.txt does not exist"):
        load(f)
    (tmp_path / "fabric.txt").write_text((FIXTURES / "virtual.txt").read_text())
    cluster = load(f)
    assert "SwitchName=spine Switches=leaf[01-02]" in topology_conf(cluster)
    from corral.components.views import package_reasons
    assert "infiniband-diags" not in package_reasons(cluster)  # a saved output: nothing runs ibnetdiscover
    f.write_text(SPEC.replace("{discover: infiniband}", "{discover: infiniband, switches: [{name: a, nodes: gpu01}]}"))
    with pytest.raises(CorralError, match="give one of switches .topology/tree., blocks .topology/block. or "
                                          "discover, not switches and discover"):
        load(f)
