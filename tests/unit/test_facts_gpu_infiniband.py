"""InfiniBand/RoCE port facts from sysfs (corral.facts.infiniband), run on fixture trees."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from corral.errors import CorralError
from corral.facts.infiniband import InfinibandPorts, materialise_tree, parse_ib_ports, parse_rate

SYSFS = Path(__file__).resolve().parent.parent / "fixtures" / "gpu" / "sysfs"


def gather(tmp_path: Path, *trees: str) -> list[dict]:
    for tree in trees:
        materialise_tree((SYSFS / tree).read_text(), tmp_path)
    command = InfinibandPorts().command(root=str(tmp_path)).get_raw_value()
    done = subprocess.run(["sh", "-c", command], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    return InfinibandPorts().process(done.stdout.splitlines())


def test_eight_ndr_hcas_one_down(tmp_path):
    ports = gather(tmp_path, "ib-ndr8-one-down.tree")
    assert [(p["hca"], p["port"]) for p in ports] == [(f"mlx5_{i}", 1) for i in range(8)]
    assert ports[0] == {"hca": "mlx5_0", "port": 1, "state": "ACTIVE", "phys_state": "LinkUp",
                        "rate": "400 Gb/sec (4X NDR)", "gbps": 400.0, "link_layer": "InfiniBand"}
    down = [p for p in ports if p["state"] != "ACTIVE"]
    assert [(p["hca"], p["state"], p["phys_state"]) for p in down] == [("mlx5_3", "DOWN", "Disabled")]


def test_roce_port_and_mixed_tree(tmp_path):
    ports = gather(tmp_path, "ib-ndr8-one-down.tree", "ib-roce-one-port.tree")
    roce = [p for p in ports if p["link_layer"] == "Ethernet"]
    assert roce == [{"hca": "rocep1s0f1", "port": 1, "state": "ACTIVE", "phys_state": "LinkUp",
                     "rate": "200 Gb/sec (2X NDR)", "gbps": 200.0, "link_layer": "Ethernet"}]
    assert len(ports) == 9


def test_node_without_rdma_devices(tmp_path):
    assert gather(tmp_path) == []
    assert InfinibandPorts.default() == []


@pytest.mark.parametrize("rate,want", [
    ("400 Gb/sec (4X NDR)", {"gbps": 400.0, "width": 4, "speed": "NDR"}),
    ("2.5 Gb/sec (1X SDR)", {"gbps": 2.5, "width": 1, "speed": "SDR"}),
    ("800 Gb/sec (4X XDR)", {"gbps": 800.0, "width": 4, "speed": "XDR"}),
    ("56 Gb/sec (4X FDR)", {"gbps": 56.0, "width": 4, "speed": "FDR"}),
])
def test_rates(rate, want):
    assert parse_rate(rate) == want


@pytest.mark.parametrize("lines,match", [
    (["/sys/class/infiniband/mlx5_0/ports/1/state 4: ACTIVE"], "want `<path>"),           # no tab
    (["/sys/class/net/ib0/speed\t400000"], "want `<path>"),                                # not a port file
    (["/sys/class/infiniband/mlx5_0/ports/1/state\t4: ACTIVE"], "lacks phys_state, rate, link_layer"),
    ([f"/sys/class/infiniband/mlx5_0/ports/1/{f}\t{v}" for f, v in
      [("state", "4: ACTIVE"), ("phys_state", "5: LinkUp"), ("rate", "fast"), ("link_layer", "InfiniBand")]],
     "port rate"),
])
def test_rejects_malformed(lines, match):
    with pytest.raises(CorralError, match=match):
        parse_ib_ports(lines)


def test_materialise_tree_refuses_escaping_paths(tmp_path):
    with pytest.raises(CorralError, match="relative"):
        materialise_tree("/etc/passwd\tx", tmp_path)
    with pytest.raises(CorralError, match="relative"):
        materialise_tree("sys/../../x\tx", tmp_path)
