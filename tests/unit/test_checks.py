"""doctor's pure evaluation and validate's Slurm parsers, on captured output."""

from __future__ import annotations

from pathlib import Path

from corral.checks.doctor import evaluate
from corral.checks.doctor_facts import parse
from corral.checks.slurm_parse import available, gres_counts, parse_show_node, ping_up, slurm_version
from corral.spec.loader import load_text

FIX = Path(__file__).parent.parent / "fixtures"
SPEC = """\
name: demo
nodes:
  - {names: ctl, addresses: [10.0.0.10], roles: [controller, accounting]}
  - names: gpu[01-02]
    addresses: 10.0.0.[11-12]
    roles: [compute]
    gpus: {model: h100, count: 4}
"""
HEALTHY_GPU = """\
OS debian 12
UID 0
DF / 50000
DF /tmp 50000
MEM MemTotal: 264000000
MEM MemAvailable: 200000000
CLOCK 1000.0
LISTEN 0.0.0.0:22 users:(("sshd",pid=1,fd=3))
LISTEN 0.0.0.0:6818 users:(("slurmd",pid=9,fd=3))
PCI 0000:18:00.0 0x2330 0x030200
PCI 0000:28:00.0 0x2330 0x030200
PCI 0000:38:00.0 0x2330 0x030200
PCI 0000:48:00.0 0x2330 0x030200
PCI 0000:05:00.0 0x22a3 0x068000
SMI NVIDIA H100 80GB HBM3, 81559
SMI NVIDIA H100 80GB HBM3, 81559
SMI NVIDIA H100 80GB HBM3, 81559
SMI NVIDIA H100 80GB HBM3, 81559
SMI_RC 0
""".splitlines()


def facts(lines, offset=0.01):
    f = parse(lines)
    f["clock_offset_s"], f["clock_error_s"] = offset, 0.005
    return f


def test_parse_doctor_facts():
    f = parse(HEALTHY_GPU)
    assert f["os"] == "debian 12" and f["uid"] == 0 and f["df"]["/"] == 50000
    assert len(f["pci"]) == 4  # the NVSwitch (class 0x0680) is not a GPU
    assert f["smi"][0] == ("NVIDIA H100 80GB HBM3", 81559) and (6818, "slurmd") in f["listen"]


def test_healthy_cluster_is_ok():
    cluster = load_text(SPEC)
    ctl = [line for line in HEALTHY_GPU if not line.startswith(("PCI", "SMI"))]
    report = evaluate(cluster, {"ctl": facts(ctl), "gpu01": facts(HEALTHY_GPU), "gpu02": facts(HEALTHY_GPU)}, {})
    assert report.ok, report.to_json()


def test_gpu_count_mismatch_names_node_and_both_numbers():
    cluster = load_text(SPEC.replace("count: 4", "count: 8"))
    report = evaluate(cluster, {"gpu01": facts(HEALTHY_GPU)}, {})
    gpus = next(c for c in report.checks if c.name == "gpus")
    assert gpus.status == "FAIL" and "gpu01: expected 8 GPUs (h100), found 4" in gpus.message


def test_driverless_node_counts_pci_and_wrong_model_fails():
    no_driver = [line for line in HEALTHY_GPU if not line.startswith("SMI")]
    cluster = load_text(SPEC)
    gpus = next(c for c in evaluate(cluster, {"gpu01": facts(no_driver)}, {}).checks if c.name == "gpus")
    assert gpus.status == "OK" and "PCI (no driver)" in gpus.nodes["gpu01"]
    a100 = load_text(SPEC.replace("model: h100", "model: a100"))
    gpus = next(c for c in evaluate(a100, {"gpu01": facts(HEALTHY_GPU)}, {}).checks if c.name == "gpus")
    assert gpus.status == "FAIL" and "expected a100 GPUs" in gpus.message


def test_unreachable_skew_port_and_os_failures():
    cluster = load_text(SPEC)
    taken = [line.replace('"slurmd"', '"nginx"') for line in HEALTHY_GPU]
    ubuntu = [line.replace("debian 12", "ubuntu 24.04") for line in HEALTHY_GPU]
    report = evaluate(cluster, {"gpu01": facts(taken, offset=9.0), "ctl": facts(ubuntu)},
                      {"gpu02": "gpu02: cannot connect to 10.0.0.12:22: timed out"})
    by = {c.name: c for c in report.checks}
    assert by["reachable"].status == "FAIL" and "gpu02" in by["reachable"].message
    assert by["clock"].status == "FAIL" and "gpu01" in by["clock"].message
    assert by["ports"].status == "FAIL" and "port 6818 held by nginx" in by["ports"].message
    assert by["os"].status == "FAIL" and "runs ubuntu-24.04 (noble) but the spec says debian-12" in by["os"].message
    assert "ctl: expected 0 GPUs (none), found 4" in by["gpus"].message  # GPUs the spec did not declare
    assert not report.ok and len(report.failures) == 5
    assert "gpu02: gpu02" not in by["reachable"].message


def test_show_node_parser_states_reasons_and_gres():
    nodes = parse_show_node((FIX / "slurm_cmd" / "show_node_o.txt").read_text())
    assert available(nodes["gpu01"]) and not available(nodes["gpu02"]) and not available(nodes["gpu03"])
    assert nodes["gpu02"]["Reason"].startswith("corral: gpu count 3 < 4")
    assert gres_counts(nodes["gpu02"]["Gres"]) == {"h100": 4}
    assert gres_counts("gpu:a100:2,gpu:h100:4(S:0-1),gpu:1") == {"a100": 2, "h100": 4, "": 1}


def test_ping_and_version():
    assert ping_up("Slurmctld(primary) at ctl is UP\n") and not ping_up("Slurmctld(primary) at ctl is DOWN")
    assert slurm_version("slurm-wlm 22.05.8\n") == "22.05.8" and slurm_version("slurm 23.11.4") == "23.11.4"


def test_a_rhel_family_node_fails_with_what_is_supported_there():
    from corral.checks.doctor import _os
    node = load_text(SPEC).node("gpu01")
    status, message = _os(node, {"os": "rocky 9.4"})
    assert status == "FAIL" and message == ("runs rocky-9: corral cannot deploy it yet (it installs with dnf; corral's "
                                            "package steps are apt's; supported: debian-12, debian-13, ubuntu-22.04, "
                                            "ubuntu-24.04)")
    assert _os(node, {"os": "almalinux 9.4"}) == ("FAIL", "almalinux 9.4 is not supported (supported: debian-12, "
                                                         "debian-13, ubuntu-22.04, ubuntu-24.04)")
    assert _os(node, {"os": "debian 12"}) == ("OK", "debian-12 (bookworm), as the spec says")


def test_a_node_on_another_release_than_its_spec_names_the_os_to_write():
    """The release a node runs is read from it: doctor names the `os:` its group should say."""
    from corral.checks.doctor import _os
    status, message = _os(load_text(SPEC).node("gpu01"), {"os": "debian 13"})
    assert status == "FAIL" and message == ("runs debian-13 (trixie) but the spec says debian-12: set `os: debian-13` "
                                            "on its node group (nodes[].os) or reinstall the node")
    trixie = load_text(SPEC.replace("roles: [compute]", "roles: [compute]\n    os: debian-13")
                       .replace("accounting]}", "accounting], os: debian-13}"))
    assert _os(trixie.node("gpu01"), {"os": "debian 13"})[0] == "OK"
