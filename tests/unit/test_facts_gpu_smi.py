"""nvidia-smi inventory and nvidia kernel module facts (corral.facts.gpu)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from corral.errors import CorralError
from corral.facts.gpu import (
    QUERY_FIELDS, KernelModule, NvidiaSmiGpus, parse_cuda_version, parse_kernel_module, parse_nvidia_smi,
    parse_query_gpu, reboot_required,
)

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "gpu"


def text(*parts: str) -> str:
    return (FIXTURES.joinpath(*parts)).read_text()


# --- nvidia-smi --query-gpu -----------------------------------------------------------------------


def test_query_gpu_h100x8():
    gpus = parse_query_gpu(text("smi", "query-gpu-h100x8.csv"))
    assert [g["index"] for g in gpus] == list(range(8))
    assert gpus[0] == {
        "index": 0, "uuid": "GPU-b42dd28e-ffdd-8720-1df0-98bd8cdc05b1", "name": "NVIDIA H100 80GB HBM3",
        "model": "h100", "pci_bus_id": "00000000:18:00.0", "slot": "0000:18:00.0", "memory_mib": 81559,
        "driver_version": "565.57.01", "persistence_mode": True, "mig_mode": "Disabled", "compute_cap": "9.0"}
    assert gpus[7]["slot"] == "0000:db:00.0"  # lowercase, 4-digit domain: matches the PCI facts


def test_query_gpu_h100_nvl_and_l40s_without_mig():
    nvl = parse_query_gpu(text("smi", "query-gpu-h100nvl-x2.csv"))
    assert [(g["name"], g["model"], g["memory_mib"]) for g in nvl] == [("NVIDIA H100 NVL", "h100", 95830)] * 2
    (l40s,) = parse_query_gpu(text("smi", "query-gpu-l40s.csv"))
    assert (l40s["model"], l40s["mig_mode"], l40s["compute_cap"]) == ("l40s", None, "8.9")


def test_query_gpu_without_compute_cap_and_unknown_name():
    line = "0, GPU-x, NVIDIA Future GPU, 00000000:01:00.0, 1000, 999.1, Disabled, [N/A]\n"
    (gpu,) = parse_query_gpu(line)
    assert (gpu["compute_cap"], gpu["persistence_mode"], gpu["mig_mode"], gpu["model"]) == (
        None, False, None, "unknown")
    assert parse_query_gpu("") == []


@pytest.mark.parametrize("line", [
    "0, NVIDIA H100 80GB HBM3, 81559",                           # a different --query-gpu
    "index, uuid, name, pci.bus_id, memory.total [MiB], driver_version, persistence_mode, "
    "mig.mode.current, compute_cap",                             # header: --format=csv without noheader
    "0, GPU-x, H100, 00000000:01:00.0, 81559 MiB, 1.2, Enabled, Disabled, 9.0",  # without nounits
])
def test_query_gpu_rejects_other_formats(line):
    with pytest.raises(CorralError, match="--query-gpu"):
        parse_query_gpu(line)


def test_query_fields_are_the_documented_names():
    assert QUERY_FIELDS == ("index", "uuid", "name", "pci.bus_id", "memory.total", "driver_version",
                            "persistence_mode", "mig.mode.current", "compute_cap")


# --- banner ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("name,cuda", [
    ("nvidia-smi-h100x8-565.txt", "12.7"), ("nvidia-smi-line3-h200-570.txt", "12.8"),
    ("nvidia-smi-quadro-470.txt", "11.4"), ("nvidia-smi-failed-no-driver.txt", None),
])
def test_cuda_version_from_banner(name, cuda):
    assert parse_cuda_version(text("smi", name)) == cuda


def test_parse_nvidia_smi_sections():
    lines = (["@@query"] + text("smi", "query-gpu-h100x8.csv").splitlines()
             + ["@@banner"] + text("smi", "nvidia-smi-h100x8-565.txt").splitlines()[:4])
    facts = parse_nvidia_smi(lines)
    assert (facts["driver_version"], facts["cuda_version"], len(facts["gpus"])) == ("565.57.01", "12.7", 8)


@pytest.mark.parametrize("name", ["nvidia-smi-failed-no-driver.txt", "nvidia-smi-failed-mismatch.txt"])
def test_failed_nvidia_smi_is_none(name):
    assert parse_nvidia_smi(["@@failed"] + text("smi", name).splitlines()) is None
    assert parse_nvidia_smi([]) is None


FAKE_SMI = """#!/bin/sh
[ -n "$FAIL" ] && { cat "$FAIL"; exit 9; }
case "$1" in
  --query-gpu=*compute_cap*) [ -n "$OLD" ] && { echo 'Field "compute_cap" is not a valid field to query.'; exit 2; }
                             cat "$CSV" ;;
  --query-gpu=*) cut -d, -f1-8 "$CSV" ;;
  *) cat "$BANNER" ;;
esac
"""


def run_with_fake_smi(tmp_path: Path, **env: str) -> list[str]:
    bindir = tmp_path / "bin"
    bindir.mkdir(exist_ok=True)
    (bindir / "nvidia-smi").write_text(FAKE_SMI)
    (bindir / "nvidia-smi").chmod(0o755)
    environ = {**os.environ, "PATH": f"{bindir}:{os.environ['PATH']}",
               "CSV": str(FIXTURES / "smi" / "query-gpu-h100x8.csv"),
               "BANNER": str(FIXTURES / "smi" / "nvidia-smi-h100x8-565.txt"), **env}
    done = subprocess.run(["sh", "-c", NvidiaSmiGpus().command()], env=environ, capture_output=True,
                          text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


def test_fact_command_with_a_driver(tmp_path):
    facts = NvidiaSmiGpus().process(run_with_fake_smi(tmp_path))
    assert facts["cuda_version"] == "12.7" and len(facts["gpus"]) == 8
    assert facts["gpus"][3]["compute_cap"] == "9.0"


def test_fact_command_falls_back_without_compute_cap(tmp_path):
    facts = NvidiaSmiGpus().process(run_with_fake_smi(tmp_path, OLD="1"))
    assert len(facts["gpus"]) == 8 and facts["gpus"][0]["compute_cap"] is None


def test_fact_command_without_driver_is_none(tmp_path):
    fail = str(FIXTURES / "smi" / "nvidia-smi-failed-no-driver.txt")
    assert NvidiaSmiGpus().process(run_with_fake_smi(tmp_path, FAIL=fail)) is None


def test_fact_command_without_nvidia_smi():
    done = subprocess.run(["/bin/sh", "-c", NvidiaSmiGpus().command()], env={"PATH": "/nonexistent"},
                          capture_output=True, text=True, timeout=30)
    assert (done.returncode, done.stdout) == (0, "")  # pyinfra then returns the default, None
    assert NvidiaSmiGpus.default() is None


# --- kernel module --------------------------------------------------------------------------------


def module(name: str) -> dict:
    return parse_kernel_module(text("module", name).splitlines())


def test_stale_module_in_initramfs_needs_reboot():
    facts = module("centos7-stale-initramfs.txt")
    assert (facts["loaded"], facts["installed"]) == ("470.103.01", "470.63.01")
    needed, why = reboot_required(facts["loaded"], facts["installed"])
    assert needed and "470.103.01" in why and "470.63.01" in why


def test_transitional_packages_are_not_the_installed_driver():
    facts = module("ubuntu2204-535-not-loaded.txt")
    assert facts["packages"]["libnvidia-compute-495"] == "510.108.03-0ubuntu0.22.04.1"
    assert facts["installed"] == "535.247.01" and facts["loaded"] is None
    assert reboot_required(facts["loaded"], facts["installed"]) == (
        True, "NVIDIA driver 535.247.01 is installed but the nvidia module is not loaded")
    facts = module("ubuntu2204-535-transitional.txt")
    assert reboot_required(facts["loaded"], facts["installed"])[0] is False


def test_no_driver_at_all():
    facts = module("no-driver.txt")
    assert facts == {"loaded": None, "on_disk": None, "packages": {}, "installed": None}
    assert reboot_required(None, None) == (False, "no NVIDIA driver installed")


def test_reboot_required_compares_upstream_versions():
    assert reboot_required("535.247.01", "535.247.01-0ubuntu1")[0] is False
    assert reboot_required("550.54.14", "535.216.03-3")[0] is True
    assert reboot_required("550.54.14", None)[0] is False


def test_kernel_module_rejects_garbage_versions():
    with pytest.raises(CorralError, match="nvidia module version"):
        parse_kernel_module(["loaded cat: /sys/module/nvidia/version: No such file"])
    assert parse_kernel_module(["dpkg un nvidia-kernel-common-535", "noise"])["packages"] == {}


def test_kernel_module_command_runs_on_a_gpu_less_host():
    done = subprocess.run(["sh", "-c", KernelModule().command()], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0
    facts = KernelModule().process(done.stdout.splitlines())
    assert set(facts) == {"loaded", "on_disk", "packages", "installed"}
