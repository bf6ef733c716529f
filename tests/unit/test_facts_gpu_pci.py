"""PCI facts (corral.facts.gpu): `lspci -nn` and sysfs parsing, classification by PCI id."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from corral.errors import CorralError
from corral.facts import pci_ids
from corral.facts.gpu import PciDevices, classify, parse_lspci_nn, parse_pci_sysfs
from corral.facts.infiniband import materialise_tree
from corral.spec.gpus import GPU_MODELS

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "gpu"


def lspci(name: str) -> list[dict]:
    return parse_lspci_nn((FIXTURES / "lspci" / name).read_text())


def run(command) -> list[str]:
    text = command.get_raw_value() if hasattr(command, "get_raw_value") else command
    done = subprocess.run(["sh", "-c", text], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


def test_hgx_a100_lspci_gpus_and_nvswitches():
    found = classify(lspci("hgx-a100x8-lspci-nn-nvidia.txt"))
    assert [g["slot"] for g in found["gpus"]] == ["0000:10:00.0", "0000:16:00.0", "0000:49:00.0", "0000:4d:00.0",
                                                   "0000:8a:00.0", "0000:8f:00.0", "0000:c6:00.0", "0000:ca:00.0"]
    assert {(g["model"], g["name"], g["generation"], g["pci_id"]) for g in found["gpus"]} == {
        ("a100", "NVIDIA A100-SXM4-80GB", "ampere", "10de:20b2")}
    assert len(found["nvswitches"]) == 6 and {s["pci_id"] for s in found["nvswitches"]} == {"10de:1af1"}
    assert found["hcas"] == []


def test_dgx_h100_lspci_domain_slots_and_non_nvidia_vga_ignored():
    devices = lspci("dgx-h100-lspci-Dnn-nvidia-vga.txt")
    assert devices[0] == {"slot": "0000:04:00.0", "vendor": 0x1A03, "device": 0x2000, "class": 0x0300,
                          "numa_node": None}  # the BMC's ASPEED VGA: a display controller, not a GPU
    found = classify(devices)
    assert len(found["gpus"]) == 8 and {g["model"] for g in found["gpus"]} == {"h100"}
    assert [s["slot"] for s in found["nvswitches"]] == ["0000:07:00.0", "0000:08:00.0", "0000:09:00.0",
                                                        "0000:0a:00.0"]
    assert {s["name"] for s in found["nvswitches"]} == {"H100 NVSwitch"}


def test_hgx_b200_lspci_path_form_and_connectx7():
    """`lspci -PP -nn` prints the bridge path; lspci's own pci.ids did not name 10de:2901 yet."""
    found = classify(lspci("hgx-b200-lspci-PP-nn.txt"))
    assert [g["slot"] for g in found["gpus"]][:2] == ["0000:1b:00.0", "0000:43:00.0"]
    assert {(g["model"], g["generation"]) for g in found["gpus"]} == {("b200", "blackwell")}
    assert len(found["hcas"]) == 12
    assert {(h["model"], h["link"], h["pci_id"]) for h in found["hcas"]} == {
        ("connectx-7", "infiniband", "15b3:1021")}
    assert found["hcas"][0]["slot"] == "0000:05:00.0"


def test_gpu_less_node_has_no_gpus_and_no_error():
    devices = lspci("gpuless-ryzen-x570-lspci-nn.txt")
    assert len(devices) == 54
    assert sum(d["class"] == 0x0300 for d in devices) == 2  # two AMD Radeon VGA controllers
    assert classify(devices) == {"gpus": [], "nvswitches": [], "hcas": []}
    assert classify([]) == {"gpus": [], "nvswitches": [], "hcas": []}


def test_unknown_nvidia_id_keeps_raw_id():
    line = "0000:af:00.0 3D controller [0302]: NVIDIA Corporation Device [10de:3340] (rev a1)\n"
    (gpu,) = classify(parse_lspci_nn(line))["gpus"]
    assert gpu == {"slot": "0000:af:00.0", "pci_id": "10de:3340", "model": "unknown", "name": "unknown",
                   "generation": "unknown", "numa_node": None}


def test_lspci_detail_lines_are_skipped():
    text = ("0000:8a:00.0 3D controller [0302]: NVIDIA Corporation GH100 [H100 SXM5 80GB] [10de:2330] (rev a1)\n"
            "\tSubsystem: NVIDIA Corporation Device [10de:16c1]\n\tKernel driver in use: nvidia\n")
    assert [d["device"] for d in parse_lspci_nn(text)] == [0x2330]


@pytest.mark.parametrize("text", [
    "01:00.0 3D controller: NVIDIA Corporation GH100 [H100 SXM5 80GB] (rev a1)",  # plain lspci, no -nn
    "garbage",
    "zz:00.0 3D controller [0302]: NVIDIA Corporation Device [10de:2330]",
])
def test_lspci_rejects_other_output(text):
    with pytest.raises(CorralError, match="lspci -nn"):
        parse_lspci_nn(text)


def test_sysfs_lines():
    lines = ["0000:1b:00.0 0x10de 0x2330 0x030200 0", "0000:9d:00.0 0x10de 0x2330 0x030200 1",
             "0000:04:00.0 0x1a03 0x2000 0x030000 -1", "0000:05:00.0 0x15b3 0x1021 0x020700 -", ""]
    devices = parse_pci_sysfs(lines)
    assert [d["numa_node"] for d in devices] == [0, 1, None, None]
    assert [d["class"] for d in devices] == [0x0302, 0x0302, 0x0300, 0x0207]
    found = classify(devices)
    assert [(g["slot"], g["numa_node"]) for g in found["gpus"]] == [("0000:1b:00.0", 0), ("0000:9d:00.0", 1)]


@pytest.mark.parametrize("line", ["0000:1b:00.0 0x10de 0x2330", "0000:1b:00.0 10de 2330 030200 0",
                                  "not a device line at all"])
def test_sysfs_rejects_malformed(line):
    with pytest.raises(CorralError, match="PCI sysfs"):
        parse_pci_sysfs([line])


def test_pci_devices_command_on_a_fixture_tree(tmp_path):
    """The fact's shell command, run on a fake /sys, agrees with lspci on the same machine."""
    materialise_tree((FIXTURES / "sysfs" / "hgx-b200-pci.tree").read_text(), tmp_path)
    (tmp_path / "sys/bus/pci/devices/0000:1b:00.0/numa_node").write_text("0\n")
    devices = PciDevices().process(run(PciDevices().command(root=str(tmp_path))))
    want = sorted(lspci("hgx-b200-lspci-PP-nn.txt"), key=lambda d: d["slot"])
    got = sorted(devices, key=lambda d: d["slot"])
    assert [{**d, "numa_node": None} for d in got] == want
    assert next(d for d in got if d["slot"] == "0000:1b:00.0")["numa_node"] == 0


def test_pci_devices_command_without_devices_is_empty(tmp_path):
    assert run(PciDevices().command(root=str(tmp_path))) == []
    assert PciDevices.default() == []


def test_pci_id_table_covers_the_spec_models():
    assert set(GPU_MODELS) <= {m.model for m in pci_ids.NVIDIA_GPUS.values()}
    assert {m.generation for m in pci_ids.NVIDIA_GPUS.values()} <= {
        "volta", "turing", "ampere", "ada", "hopper", "blackwell"}
    for m in pci_ids.NVIDIA_GPUS.values():  # generations agree with the spec's table
        if m.model in GPU_MODELS:
            assert GPU_MODELS[m.model].generation == m.generation, m
    assert pci_ids.nvidia_gpu(0x2321).name == "NVIDIA H100 NVL"
