"""`nvidia-smi topo -m` parsing and gres.conf Links=/Cores= (corral.facts.gpu_topology)."""

from __future__ import annotations

from pathlib import Path

import pytest

from corral.errors import CorralError
from corral.facts.gpu_topology import (
    compress_cpulist, cpu_to_core, expand_cpulist, gres_cores, gres_links, nvlink_pairs,
    parse_topology,
)

TOPO = Path(__file__).resolve().parent.parent / "fixtures" / "gpu" / "topo"


def topo(name: str) -> dict:
    return parse_topology((TOPO / name).read_text())


def test_hgx_h200_nvswitch_with_nic_legend():
    t = topo("hgx-h200x8-nic-legend.txt")
    assert sorted(t["gpus"]) == list(range(8))
    assert t["nics"] == [f"mlx5_{i}" for i in range(8)]  # NIC0..NIC7 renamed from the NIC Legend
    g0 = t["gpus"][0]
    assert g0["links"] == {j: "NV18" for j in range(1, 8)}
    assert g0["nics"]["mlx5_4"] == "PIX" and g0["nics"]["mlx5_2"] == "SYS"
    assert g0["cpu_affinity"] == list(range(0, 64)) + list(range(128, 192))
    assert g0["numa_affinity"] == [0] and t["gpus"][7]["numa_affinity"] == [1]
    assert len(nvlink_pairs(t)) == 28 and nvlink_pairs(t)[0] == (0, 1, 18)
    assert gres_links(t)[0] == "-1,18,18,18,18,18,18,18"
    assert gres_links(t)[5] == "18,18,18,18,18,-1,18,18"
    assert gres_cores(t)[4] == "64-127,192-255"


def test_dgx_a100_old_format_mlx5_columns():
    t = topo("dgx-a100-mlx5.txt")
    assert t["nics"] == [f"mlx5_{i}" for i in range(12)]
    assert {j: t["gpus"][6]["links"][j] for j in (0, 7)} == {0: "NV12", 7: "NV12"}
    assert [t["gpus"][i]["numa_affinity"] for i in range(8)] == [[3], [3], [1], [1], [7], [7], [5], [5]]
    assert t["gpus"][6]["nics"]["mlx5_8"] == "PXB"
    assert gres_links(t)[2] == "12,12,-1,12,12,12,12,12"
    assert gres_cores(t) == {0: "48-63,176-191", 1: "48-63,176-191", 2: "16-31,144-159", 3: "16-31,144-159",
                             4: "112-127,240-255", 5: "112-127,240-255", 6: "80-95,208-223", 7: "80-95,208-223"}


def test_pcie_only_paths_have_no_nvlinks():
    t = topo("dgx1-mp-pcie-paths.txt")
    assert t["gpus"][0]["links"] == {1: "PIX", 2: "PHB", 3: "PHB", 4: "SYS", 5: "SYS", 6: "SYS", 7: "SYS"}
    assert nvlink_pairs(t) == []
    assert gres_links(t)[3] == "0,0,0,-1,0,0,0,0"


def test_pcie_system_without_nics():
    t = topo("pcie-6gpu-pix-node-sys.txt")
    assert t["nics"] == [] and t["gpus"][4]["nics"] == {}
    assert t["gpus"][2]["links"] == {0: "NODE", 1: "NODE", 3: "PIX", 4: "SYS", 5: "SYS"}
    assert gres_cores(t)[5] == "24-47,72-95"


@pytest.mark.parametrize("name", ["hgx-h200x8-nic-legend.txt", "dgx-a100-mlx5.txt", "pcie-6gpu-pix-node-sys.txt"])
def test_terminal_copies_with_spaces_read_the_same(name):
    """Copied from a terminal the tabs are spaces (and collect_env scripts indent the matrix)."""
    text = (TOPO / name).read_text()
    spaced = "\n".join("    " + ln for ln in text.expandtabs(8).splitlines())
    assert parse_topology(spaced) == parse_topology(text)


def test_gres_cores_maps_threads_to_cores():
    t = topo("pcie-6gpu-pix-node-sys.txt")  # 2 sockets x 24 cores x 2 threads: cpu n and n+48 share a core
    lscpu = ["# Socket,Core,CPU"] + [f"{c // 24 % 2},{c % 48},{c}" for c in range(96)]
    mapping = cpu_to_core(lscpu)
    assert mapping[49] == 1 and mapping[72] == 24
    assert gres_cores(t, mapping) == {0: "0-23", 1: "0-23", 2: "0-23", 3: "0-23", 4: "24-47", 5: "24-47"}
    with pytest.raises(CorralError, match="lscpu does not list"):
        gres_cores(t, {0: 0})


def test_core_index_is_socket_by_socket_whatever_the_cpu_numbering():
    """CPUs numbered alternately across two sockets: Slurm's core 0-3 are socket 0's cores."""
    mapping = cpu_to_core([f"{c % 2},{c},{c}" for c in range(8)])
    assert mapping == {0: 0, 2: 1, 4: 2, 6: 3, 1: 4, 3: 5, 5: 6, 7: 7}
    t = parse_topology("\tGPU0\tGPU1\tCPU Affinity\tNUMA Affinity\n"
                       "GPU0\t X \tSYS\t0,2,4,6\t0\nGPU1\tSYS\t X \t1,3,5,7\t1\n")
    assert gres_cores(t, mapping) == {0: "0-3", 1: "4-7"}


def test_cpulists():
    assert expand_cpulist("0-2,5") == [0, 1, 2, 5]
    assert expand_cpulist("N/A") == [] and expand_cpulist("7") == [7]
    assert compress_cpulist([5, 0, 1, 2, 2]) == "0-2,5" and compress_cpulist([]) == ""
    for bad in ("0-", "3-1", "a,b"):
        with pytest.raises(CorralError, match="CPU list"):
            expand_cpulist(bad)


@pytest.mark.parametrize("text,match", [
    ("", "no `nvidia-smi topo -m` matrix"),
    ("No devices were found", "no `nvidia-smi topo -m` matrix"),
    ("\tGPU0\tGPU1\tCPU Affinity\nGPU0\t X \tNV4\t0-7\nGPU1\tNV4\n", "malformed"),             # short row
    ("\tGPU0\tGPU1\tCPU Affinity\nGPU0\t X \tnv?\t0-7\nGPU1\tNV4\t X \t0-7\n", "malformed"),  # bad link
    ("\tGPU0\tGPU1\tCPU Affinity\nGPU0\t X \tNV4\t0-7\n", "without rows"),                    # truncated
])
def test_rejects_malformed(text, match):
    with pytest.raises(CorralError, match=match):
        parse_topology(text)

