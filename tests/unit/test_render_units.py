"""Unit tests of the Slurm renderers' rules: versions, memory defaults, preemption, escaping,
and what happens when facts are missing."""

from __future__ import annotations

import pytest

from corral.errors import CorralError
from corral.render import (NodeHW, render_cgroup_conf, render_gres_conf, render_slurm_conf,
                           render_slurmdbd_conf, slurm_version_tuple)
from corral.spec.loader import load_text

BASE = """\
name: t
nodes:
  - names: ctl
    addresses: [10.0.0.2]
    roles: [controller, accounting]
{groups}
{slurm}"""
HW = NodeHW(cpus=64, sockets=2, cores_per_socket=16, threads_per_core=2, memory_mb=256000)


def cluster(groups: str, slurm: str = "", extra: str = ""):
    return load_text(BASE.format(groups=groups, slurm=slurm) + extra, "my-cluster.yaml")


def settings(text: str) -> dict[str, str]:
    """The single-valued settings (not comments, nodes or partitions)."""
    skip = ("#", "NodeName=", "PartitionName=")
    return dict(ln.split("=", 1) for ln in text.splitlines() if ln and not ln.startswith(skip))


def node_lines(text: str) -> list[str]:
    return [ln for ln in text.splitlines() if ln.startswith("NodeName=")]


GPU8 = """\
  - names: gpu[01-04]
    addresses: 10.0.0.[11-14]
    roles: [compute]
    gpus: {model: h100, count: 8}
    memory_mb: 1000000"""


@pytest.mark.parametrize(("text", "want"), [
    ("22.05.8", (22, 5)), ("slurm-wlm 23.11.4", (23, 11)), ("slurm 24.05.0-0rc1", (24, 5)),
    ("22.05.8-4+deb12u3", (22, 5)), ("slurm 25.11.1\n", (25, 11)), ("23.02", (23, 2))])
def test_version_tuple(text, want):
    assert slurm_version_tuple(text) == want


def test_version_tuple_error():
    with pytest.raises(CorralError, match="Slurm version"):
        slurm_version_tuple("slurmd: command not found")


def test_header_names_the_spec_file():
    c = cluster(GPU8)
    for text in (render_slurm_conf(c, {}), render_gres_conf(c), render_cgroup_conf(c),
                 render_slurmdbd_conf(c, db_password="x")):
        assert text.splitlines()[0] == "# Managed by corral from my-cluster.yaml — do not edit"


def test_node_lines_and_defaults():
    c = cluster(GPU8 + """
  - names: cpu[1-2]
    addresses: 10.0.0.[21-22]
    roles: [compute]
  - names: login1
    addresses: [10.0.0.30]
    roles: [login]
    gpus: {model: l4, count: 1}""")
    text = render_slurm_conf(c, {"gpu01": HW, "gpu02": HW, "gpu03": HW, "gpu04": HW, "cpu1": HW, "cpu2": HW})
    assert node_lines(text) == [
        "NodeName=cpu[1-2] NodeAddr=10.0.0.[21-22] CPUs=64 Sockets=2 CoresPerSocket=16 ThreadsPerCore=2 "
        "RealMemory=256000 State=UNKNOWN",
        "NodeName=gpu[01-04] NodeAddr=10.0.0.[11-14] CPUs=64 Sockets=2 CoresPerSocket=16 ThreadsPerCore=2 "
        "RealMemory=1000000 Gres=gpu:h100:8 Features=h100,hopper,gpu State=UNKNOWN"]  # no login node
    s = settings(text)
    assert s["DefMemPerGPU"] == "125000" and s["SlurmctldHost"] == "ctl(10.0.0.2)"
    assert s["AccountingStorageTRES"] == "gres/gpu,gres/gpu:h100"  # GPUs of compute nodes only
    assert "PartitionName=gpu Nodes=cpu[1-2],gpu[01-04] Default=YES MaxTime=INFINITE PriorityTier=1 " \
           "DefMemPerCPU=4000 OverSubscribe=NO State=UP" in text
    assert "CredType=cred/munge" in text and "CryptoType" not in text


def test_missing_facts_never_fail():
    c = cluster(GPU8 + """
  - names: cpu1
    addresses: [10.0.0.21]
    roles: [compute]""")
    text = render_slurm_conf(c, {})
    assert node_lines(text) == [
        "NodeName=cpu1 NodeAddr=10.0.0.21 State=UNKNOWN",
        "NodeName=gpu[01-04] NodeAddr=10.0.0.[11-14] RealMemory=1000000 Gres=gpu:h100:8 "
        "Features=h100,hopper,gpu State=UNKNOWN"]
    assert "# not yet probed (no CPUs; RealMemory only from the spec): cpu1,gpu[01-04]" in text
    assert "DefMemPerCPU=1024" in text  # nothing known: a fixed share, never 0 (= the whole node)


def test_hw_memory_used_when_spec_has_none_and_def_mem_never_zero():
    c = cluster("""\
  - names: big
    addresses: [10.0.0.11]
    roles: [compute]
    gpus: {model: zz9, count: 64, model_unknown_ok: true}
    memory_mb: 64""")
    text = render_slurm_conf(c, {"big": NodeHW(256, 2, 64, 2, 999999)})
    assert "RealMemory=64 " in text and "Features=zz9,gpu " in text  # unknown model: no generation
    s = settings(text)
    assert s["DefMemPerGPU"] == "1"
    assert "DefMemPerCPU=1 " in text


def test_virtual_memory_and_cgroup():
    extra = "virtual:\n  subnet: 10.0.0.0/16\n  node_memory_mb: 3000\n"
    c = cluster(GPU8.replace("    memory_mb: 1000000", "") + """
  - names: cpu1
    addresses: [10.0.0.21]
    roles: [compute]
    memory_mb: 5000""", extra=extra)
    text = render_slurm_conf(c, {"gpu01": HW})
    assert "NodeName=cpu1 NodeAddr=10.0.0.21 RealMemory=5000 " in text  # the node's own memory_mb wins
    assert "NodeName=gpu01 NodeAddr=10.0.0.11 CPUs=64 Sockets=2 CoresPerSocket=16 ThreadsPerCore=2 " \
           "RealMemory=3000 " in text  # not the host's 256000
    cg = render_cgroup_conf(c)
    assert "CgroupPlugin=cgroup/v1" in cg and "ConstrainRAMSpace=no" in cg


@pytest.mark.parametrize(("version", "plugin", "automount"), [
    ((20, 11), False, True), ((21, 8), True, True), ((22, 5), True, True), ((23, 2), True, True),
    ((23, 11), True, False), ((24, 5), True, False)])
def test_cgroup_versions(version, plugin, automount):
    text = render_cgroup_conf(cluster(GPU8), version=version)
    assert ("CgroupPlugin=autodetect" in text) == plugin
    assert ("CgroupAutomount=yes" in text) == automount
    assert "ConstrainRAMSpace=yes" in text and "ConstrainDevices=yes" in text and "ConstrainCores=yes" in text


@pytest.mark.parametrize(("qos", "want"), [
    ("[{name: a}, {name: b}]", None),
    ("[{name: a, preempt: [b]}, {name: b}]", "REQUEUE"),
    ("[{name: a, preempt: [b]}, {name: b, preempt_mode: cancel}]", "CANCEL"),
    ("[{name: a, preempt: [b, c]}, {name: b, preempt_mode: suspend}, {name: c, preempt_mode: suspend}]",
     "SUSPEND,GANG"),
    ("[{name: a, preempt: [b, c]}, {name: b, preempt_mode: suspend}, {name: c, preempt_mode: requeue}]",
     "REQUEUE,GANG"),
])
def test_preempt_mode(qos, want):
    s = settings(render_slurm_conf(cluster(GPU8, f"slurm:\n  qos: {qos}\n"), {}))
    assert s.get("PreemptMode") == want
    assert s.get("PreemptType") == ("preempt/qos" if want else None)


def test_partitions_default_and_qos():
    slurm = """slurm:
  qos: [{name: low}]
  partitions:
    - {name: a, nodes: "gpu[01-02]", max_time: "1:00:00", qos: low, priority_tier: 5}
    - {name: b, nodes: "gpu[03-04]"}
  fairshare: {enabled: false}
  enforce_limits: false
"""
    text = render_slurm_conf(cluster(GPU8, slurm), {})
    assert [ln.split(" DefMem")[0] for ln in text.splitlines() if ln.startswith("PartitionName=")] == [
        "PartitionName=a Nodes=gpu[01-02] Default=YES MaxTime=1:00:00 PriorityTier=5 QOS=low",
        "PartitionName=b Nodes=gpu[03-04] MaxTime=INFINITE PriorityTier=1"]
    s = settings(text)
    assert "PriorityType" not in s and "AccountingStorageEnforce" not in s


def test_cpu_only_default_partition_is_batch_and_ipv6():
    c = cluster("""\
  - names: n[1-2]
    addresses: ["fd00::11", "fd00::12"]
    roles: [compute]""")
    text = render_slurm_conf(c, {})
    assert "PartitionName=batch Nodes=n[1-2] Default=YES" in text
    assert "CommunicationParameters=EnableIPv6" in text
    assert node_lines(text)[0].startswith("NodeName=n1 NodeAddr=fd00::11 ")
    assert "DefMemPerGPU" not in text and "GresTypes=gpu" in text
    assert render_gres_conf(c).splitlines()[2:] == ["AutoDetect=off"]


def test_backup_controller_order_follows_the_spec():
    c = load_text("""\
name: ha
nodes:
  - names: zz-primary,aa-backup
    addresses: [10.0.0.2, 10.0.0.1]
    roles: [controller]
  - names: n1
    addresses: [10.0.0.11]
    roles: [compute]
storage:
  mounts: [{path: /srv/slurmctld-state, server: nas1, export: /export/state, roles: [controller]}]
slurm: {state_save_location: /srv/slurmctld-state}
""", "cluster.yaml")
    hosts = [ln for ln in render_slurm_conf(c, {}).splitlines() if ln.startswith("SlurmctldHost=")]
    assert hosts == ["SlurmctldHost=zz-primary(10.0.0.2)", "SlurmctldHost=aa-backup(10.0.0.1)"]


def test_gres_single_gpu_and_nvml():
    c = cluster("""\
  - names: t4-[1-2]
    addresses: 10.0.0.[11-12]
    roles: [compute]
    gpus: {model: t4, count: 1}""")
    assert render_gres_conf(c).splitlines()[2:] == [
        "AutoDetect=off", "NodeName=t4-[1-2] Name=gpu Type=t4 File=/dev/nvidia0"]
    c = cluster(GPU8, "slurm:\n  gres_autodetect: nvml\n")
    assert render_gres_conf(c).splitlines()[2:] == [
        "AutoDetect=nvml", "NodeName=gpu[01-04] Name=gpu Type=h100 Count=8"]


@pytest.mark.parametrize(("password", "written"),
                         [("abc123", "abc123"), ("a#b", "a\\#b"), ("a\\b", "a\\\\b")])
def test_slurmdbd_password_escaped(password, written):
    text = render_slurmdbd_conf(cluster(GPU8), db_password=password)
    assert f"StoragePass={written}\n" in text
    assert "DbdHost=ctl\nDbdAddr=10.0.0.2\n" in text


@pytest.mark.parametrize("password", ["", "a b", 'a"b', "a\nb"])
def test_slurmdbd_password_refused(password):
    with pytest.raises(CorralError, match="password") as exc:
        render_slurmdbd_conf(cluster(GPU8), db_password=password)
    assert password not in str(exc.value) or not password


def test_cpus_that_do_not_add_up_are_made_consistent():
    """slurmctld (cons_tres) exits when CPUs is neither Sockets*Cores nor Sockets*Cores*Threads."""
    c = cluster(GPU8)
    hw = {"gpu01": NodeHW(64, 2, 16, 2, 1), "gpu02": NodeHW(32, 2, 16, 2, 1),  # both fine
          "gpu03": NodeHW(2, 2, 8, 2, 1), "gpu04": NodeHW(61, 2, 15, 2, 1)}  # lscpu with offline CPUs
    cpus = [ln.split("CPUs=")[1].split()[0] for ln in node_lines(render_slurm_conf(c, hw))]
    assert cpus == ["64", "32", "32", "60"]


def test_gres_cores_and_links_from_the_node_topology():
    """Node facts with `nvidia-smi topo -m` (an 8 x H200 HGX, captured) give one gres.conf line per
    GPU with its Cores= and Links=; nodes without topology keep the File= range."""
    from pathlib import Path

    from corral.facts.hardware import parse_hardware
    topo = (Path(__file__).parent.parent / "fixtures" / "gpu" / "topo" / "hgx-h200x8-nic-legend.txt").read_text()
    lscpu = [f"{cpu // 64 % 2},{cpu % 128},{cpu}" for cpu in range(256)]  # 2 sockets x 64 cores x 2 threads
    hw = parse_hardware(lscpu + ["MemTotal: 2113511312 kB", "@@topo", *topo.splitlines()])
    assert len(hw.gpu_links) == 8 and hw.gpu_links[0].startswith("-1,18,")
    c = cluster(GPU8)
    lines = render_gres_conf(c, {"gpu01": hw, "gpu02": hw}).splitlines()[2:]
    assert lines[0] == "AutoDetect=off"
    assert lines[1].startswith("NodeName=gpu[01-02] Name=gpu Type=h100 File=/dev/nvidia0 Cores=")
    assert lines[1].endswith(" Links=-1,18,18,18,18,18,18,18") and len(lines) == 1 + 8 + 1
    assert lines[-1] == "NodeName=gpu[03-04] Name=gpu Type=h100 File=/dev/nvidia[0-7]"
    # NVML autodetect finds cores and links itself
    nvml = cluster(GPU8, "slurm:\n  gres_autodetect: nvml\n")
    assert render_gres_conf(nvml, {"gpu01": hw}).splitlines()[2:] == [
        "AutoDetect=nvml", "NodeName=gpu[01-04] Name=gpu Type=h100 Count=8"]


def test_topology_with_another_gpu_count_than_the_spec_is_ignored():
    from corral.render import NodeHW
    hw = NodeHW(2, 1, 2, 1, 1000, gpu_cores=("0-1",) * 4, gpu_links=("-1,18,18,18",) * 4)
    assert render_gres_conf(cluster(GPU8), {"gpu01": hw}).splitlines()[3:] == [
        "NodeName=gpu[01-04] Name=gpu Type=h100 File=/dev/nvidia[0-7]"]
