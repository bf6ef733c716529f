"""corral-health parsers on captured formats (tests/fixtures/health/README.md says where each is from)."""

from __future__ import annotations

from pathlib import Path

import pytest

from corral.node import health_parse as P

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "health"


def fx(name: str) -> str:
    return (FIX / name).read_text()


# --- GPU count and model -------------------------------------------------------------------------

def test_device_files_count_only_numbered_gpus():
    names = ["nvidia0", "nvidia1", "nvidia10", "nvidiactl", "nvidia-uvm", "nvidia-uvm-tools",
             "nvidia-modeset", "nvidia-caps", "null", "nvme0"]
    assert P.count_gpu_device_files(names) == 3


def test_gpu_query_h100x8():
    gpus = P.parse_gpu_query(fx("query-gpu-h100x8.csv"))
    assert [g["index"] for g in gpus] == list(range(8))
    assert {g["name"] for g in gpus} == {"NVIDIA H100 80GB HBM3"}
    assert gpus[0]["memory_mib"] == 81559


def test_gpu_query_standin_reports_only_present_devices():
    gpus = P.parse_gpu_query(fx("standin-query-gpu-3of4.csv"))
    assert [g["index"] for g in gpus] == [0, 1, 3]
    assert gpus[0] == {"index": 0, "name": "NVIDIA H100 80GB HBM3", "memory_mib": 81920}


def test_gpu_query_ignores_noise_and_errors():
    assert P.parse_gpu_query("") == []
    assert P.parse_gpu_query("NVIDIA-SMI has failed because it couldn't communicate with the driver") == []


@pytest.mark.parametrize("name,model,ok", [
    ("NVIDIA H100 80GB HBM3", "h100", True),
    ("NVIDIA A100-SXM4-80GB", "a100", True),
    ("NVIDIA A100-SXM4-80GB", "a100-80gb", True),
    ("NVIDIA A10", "a100", False),
    ("NVIDIA A100-SXM4-80GB", "a10", False),
    ("NVIDIA H100 NVL", "H100", True),
    ("NVIDIA L40S", "h100", False),
    ("anything", None, True),
])
def test_model_matches(name, model, ok):
    assert P.model_matches(name, model) is ok


def test_temperatures():
    assert P.parse_gpu_temps(fx("query-temp-a100x4.csv")) == {0: 25, 1: 22, 2: 23, 3: 23}
    assert P.parse_gpu_temps(fx("standin-query-temp.csv")) == {0: 30, 1: 30, 3: 30}
    assert P.parse_gpu_temps("0, [N/A]\n1, 41\n") == {0: None, 1: 41}


# --- nvidia-smi -q: ECC, retired pages, remapped rows ----------------------------------------------

def test_smi_q_tree_h100():
    gpus = P.parse_smi_q(fx("nvidia-smi-q-ecc-h100x8.txt"))
    assert list(gpus) == ["00000000:18:00.0", "00000000:2A:00.0", "00000000:3A:00.0", "00000000:5D:00.0",
                          "00000000:9A:00.0", "00000000:AB:00.0", "00000000:BA:00.0", "00000000:DB:00.0"]
    g = gpus["00000000:18:00.0"]
    assert g["ecc mode/current"] == "Enabled"
    assert g["ecc errors/volatile/sram uncorrectable sec-ded"] == "0"
    assert g["ecc errors/aggregate/sram threshold exceeded"] == "No"
    assert g["retired pages/pending page blacklist"] == "N/A"
    assert g["remapped rows/bank remap availability histogram/max"] == "2560 bank(s)"


def test_smi_q_full_output_values_with_colons():
    g = P.parse_smi_q(fx("nvidia-smi-q-full-a100x4.txt"))["00000000:68:00.0"]
    assert g["product name"] == "NVIDIA A100-SXM4-80GB"
    assert g["pci/bus id"] == "00000000:68:00.0"
    assert g["temperature/gpu current temp"] == "25 C"


@pytest.mark.parametrize("fixture,gpus", [
    ("nvidia-smi-q-ecc-h100x8.txt", 8),        # H100 SXM, driver 565: all zero
    ("nvidia-smi-q-ecc-a100x8-535.txt", 8),    # A100 40GB, 535, `-d ECC` only: aggregate DRAM correctable 87
    ("nvidia-smi-q-ecc-a40x10.txt", 10),       # A40: rows remapped for correctable errors, none pending
    ("nvidia-smi-q-ecc-v100-470.txt", 1),      # Volta layout (Single/Double Bit), 1 retired SBE page
])
def test_ecc_healthy(fixture, gpus):
    status, msg = P.check_ecc(fx(fixture))
    assert status == P.OK, msg
    assert f"on {gpus} GPUs" in msg


def test_ecc_h100_uncorrectable_and_remap_failure():
    status, msg = P.check_ecc(fx("nvidia-smi-q-ecc-h100x8-errors.txt"))
    assert status == P.FAIL
    assert "gpu 00000000:3A:00.0: 2 uncorrectable ECC errors" in msg
    assert "gpu 00000000:3A:00.0: row remap pending" in msg
    assert "gpu 00000000:BA:00.0: row remapping failure" in msg
    assert "18:00.0" not in msg


@pytest.mark.parametrize("fixture,bus", [
    ("nvidia-smi-q-full-a100x4.txt", "00000000:9E:00.0"),           # real capture: a pending remap
    ("nvidia-smi-q-a100-510-remap-pending.txt", "00000000:10:1C.0"),  # driver 510 field names
])
def test_ecc_a100_row_remap_pending(fixture, bus):
    status, msg = P.check_ecc(fx(fixture))
    assert (status, msg) == (P.FAIL, f"gpu {bus}: row remap pending (reset the GPU)")


def test_ecc_volta_double_bit_and_retired_page_pending():
    status, msg = P.check_ecc(fx("nvidia-smi-q-ecc-v100-470-dbe-pending.txt"))
    assert status == P.FAIL
    assert "1 uncorrectable ECC error;" in msg and "retired pages pending" in msg


def test_ecc_aggregate_counts_are_history_not_failures():
    fields = P.parse_smi_q(fx("nvidia-smi-q-ecc-a100x8-535.txt"))["00000000:0B:00.0"]
    assert fields["ecc errors/aggregate/dram correctable"] == "87"
    assert P.ecc_findings(fields) == ([], [])


def test_ecc_disabled_warns_and_sram_threshold_fails():
    text = fx("nvidia-smi-q-ecc-h100x8.txt")
    on, off = "Current                           : Enabled", "Current                           : Disabled"
    text = text.replace(on, off, 1)
    assert P.check_ecc(text) == (P.WARN, "gpu 00000000:18:00.0: ECC disabled")
    text = text.replace("SRAM Threshold Exceeded       : No", "SRAM Threshold Exceeded       : Yes", 1)
    assert P.check_ecc(text)[0] == P.FAIL


def test_ecc_standin_and_empty():
    emulated = (P.SKIPPED, "emulated GPUs (corral virtual cluster): no ECC data")
    assert P.check_ecc(fx("standin-q-ecc.txt")) == emulated
    assert P.check_ecc("")[0] == P.SKIPPED


# --- services, mounts, free space -----------------------------------------------------------------

def test_is_active():
    states = P.parse_is_active("active\ninactive\n", ["munge", "slurmd", "chronyd"])
    assert states == {"munge": "active", "slurmd": "inactive", "chronyd": "unknown"}
    assert P.check_services(states) == (P.FAIL, "service slurmd inactive, service chronyd unknown")
    starting = {"munge": "active", "slurmd": "activating"}
    assert P.check_services(starting) == (P.WARN, "service slurmd activating")
    assert P.check_services({"munge": "active"}) == (P.OK, "active: munge")


def test_mounts():
    probes = {"/": {"exists": True, "ismount": True, "writable": True},
              "/scratch": {"exists": True, "ismount": False},
              "/data": {"exists": True, "ismount": True, "writable": False,
                        "write_error": "Read-only file system"},
              "/nfs": {"error": "probe path:/nfs timed out after 9.8 s"}}
    assert P.check_mounts(["/"], probes) == (P.OK, "mounted and writable: /")
    probes["/gone"] = {"exists": False}
    status, msg = P.check_mounts(["/", "/scratch", "/data", "/nfs", "/gone"], probes)
    assert status == P.FAIL
    assert msg == ("/scratch not mounted; mount /data not writable (Read-only file system); "
                   "mount /nfs: probe path:/nfs timed out after 9.8 s; mount /gone missing")


def test_free_space():
    probes = {"/": {"exists": True, "free_mb": 9000}, "/tmp": {"exists": True, "free_mb": 100},
              "/var/lib/slurm": {"exists": False}}
    assert P.check_free_space({"/": 512}, probes) == (P.OK, "free: / 9000 MB")
    assert P.check_free_space({"/": 512, "/var/lib/slurm": 256}, probes) == (
        P.WARN, "free space /var/lib/slurm: path does not exist")
    assert P.check_free_space({"/tmp": 256, "/var/lib/slurm": 256}, probes) == (
        P.FAIL, "free space /tmp 100 MB < 256 MB; free space /var/lib/slurm: path does not exist")
