"""The job environment from a node's fabric facts (render/job_env.py) on captured and composed facts
(tests/fixtures/gpu/: `nvidia-smi topo -m` matrices and sysfs trees; see its README), the facts' own
parsing (facts/hardware.py net_facts), and the TaskProlog that exports it."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from corral.facts.hardware import gpu_topology, net_facts
from corral.facts.infiniband import parse_ib_ports
from corral.facts.records import NodeHW
from corral.render.job_env import job_env, job_env_text, task_prolog
from corral.spec.loader import load_text

GPU = Path(__file__).resolve().parents[1] / "fixtures" / "gpu"
SPEC = """name: t
nodes:
  - {names: ctl, addresses: [10.0.0.10], roles: [controller]}
  - {names: gpu01, addresses: [10.0.0.11], roles: [compute], gpus: {model: h100, count: 8}}
"""


def rdma_of(tree: str) -> tuple[str, ...]:
    """The sysfs tree as the hardware fact reads it (its @@rdma lines), through net_facts."""
    ports = parse_ib_ports([ln for ln in (GPU / "sysfs" / tree).read_text().splitlines() if not ln.startswith("#")])
    lines = [f"@@rdma\t/sys/class/infiniband/{p['hca']}/ports/{p['port']}\t{p['state']}\t{p['link_layer']}\t{p['rate']}"
             for p in ports]
    return net_facts(lines)[0]


def hw(rdma=(), topo: str | None = None, addrs=("lo 127.0.0.1", "enp1s0 10.0.0.11")) -> NodeHW:
    nics = gpu_topology([], (GPU / "topo" / topo).read_text())[2] if topo else ()
    return NodeHW(cpus=8, sockets=1, cores_per_socket=8, threads_per_core=1, memory_mb=1000, rdma=tuple(rdma),
                  gpu_nics=nics, addrs=tuple(addrs))


def env(facts: NodeHW, extra: str = "") -> dict[str, str]:
    cluster = load_text(SPEC + extra, "cluster.yaml")
    return job_env(cluster, cluster.node("gpu01"), facts)


def test_an_hgx_h200_with_one_hca_down():
    rdma = rdma_of("ib-ndr8-one-down.tree")
    assert "mlx5_3:1:DOWN:InfiniBand:10" in rdma
    got = env(hw(rdma, "hgx-h200x8-nic-legend.txt"))
    hcas = "mlx5_0:1,mlx5_1:1,mlx5_2:1,mlx5_4:1,mlx5_5:1,mlx5_6:1,mlx5_7:1"
    assert got == {"NCCL_IB_HCA": "=" + hcas, "UCX_NET_DEVICES": hcas, "NCCL_SOCKET_IFNAME": "=enp1s0"}


def test_a_dgx_a100_keeps_the_hcas_near_its_gpus():
    """12 HCAs all up at one rate: the 8 at PXB from a GPU are NCCL's; the storage ones are left out."""
    rdma = [f"mlx5_{i}:1:ACTIVE:InfiniBand:200" for i in range(12)]
    got = env(hw(rdma, "dgx-a100-mlx5.txt"))
    assert got["NCCL_IB_HCA"] == "=mlx5_0:1,mlx5_1:1,mlx5_2:1,mlx5_3:1,mlx5_6:1,mlx5_7:1,mlx5_8:1,mlx5_9:1"


def test_a_pcie_node_with_roce_and_a_slower_port():
    rdma = (*rdma_of("ib-roce-one-port.tree"), "mlx5_9:1:ACTIVE:Ethernet:25")
    got = env(hw(rdma, "pcie-6gpu-pix-node-sys.txt"))  # no NIC columns: every port at the top rate
    assert got == {"NCCL_IB_HCA": "=rocep1s0f1:1", "UCX_NET_DEVICES": "rocep1s0f1:1", "NCCL_IB_GID_INDEX": "3",
                   "NCCL_SOCKET_IFNAME": "=enp1s0"}


def test_no_rdma_and_the_spec_over_the_facts():
    assert env(hw()) == {"NCCL_SOCKET_IFNAME": "=enp1s0"}
    assert env(hw(addrs=("lo 127.0.0.1",))) == {}
    over = "fabric: {env: {NCCL_SOCKET_IFNAME: '=ib0', NCCL_DEBUG: WARN}}\n"
    assert env(hw(), over) == {"NCCL_DEBUG": "WARN", "NCCL_SOCKET_IFNAME": "=ib0"}
    assert env(hw(), "fabric: {env: {NCCL_SOCKET_IFNAME: ''}}\n") == {}
    assert env(hw(), "fabric: {job_env: false, env: {NCCL_DEBUG: WARN}}\n") == {}


def test_the_task_prolog_exports_what_the_job_did_not_set(tmp_path):
    cluster = load_text(SPEC, "cluster.yaml")
    text = job_env_text(cluster, cluster.node("gpu01"), hw(["mlx5_0:1:ACTIVE:InfiniBand:400"]))
    assert text.splitlines()[1:] == ["NCCL_IB_HCA==mlx5_0:1", "NCCL_SOCKET_IFNAME==enp1s0", "UCX_NET_DEVICES=mlx5_0:1"]
    (tmp_path / "job-env").write_text(text + "BAD-NAME=x\n$(touch pwned)=1\n")
    script = tmp_path / "task-prolog"
    script.write_text(task_prolog().replace("/etc/corral/job-env", str(tmp_path / "job-env")))
    out = subprocess.run(["sh", str(script)], capture_output=True, text=True, cwd=tmp_path,
                         env={**os.environ, "UCX_NET_DEVICES": "mine", "XDG_RUNTIME_DIR": str(tmp_path)}).stdout
    assert out.splitlines() == ["export NCCL_IB_HCA==mlx5_0:1", "export NCCL_SOCKET_IFNAME==enp1s0"]
    assert not (tmp_path / "pwned").exists()


def test_the_task_prolog_unsets_a_runtime_dir_the_node_lacks(tmp_path):
    """Slurm exports the submitting shell's environment: the login node's /run/user/UID is not there."""
    script = tmp_path / "task-prolog"
    script.write_text(task_prolog().replace("/etc/corral/job-env", str(tmp_path / "no-job-env")))
    def run(value):
        env = {k: v for k, v in os.environ.items() if k != "XDG_RUNTIME_DIR"}
        return subprocess.run(["sh", str(script)], capture_output=True, text=True,
                              env={**env, **({"XDG_RUNTIME_DIR": value} if value is not None else {})}).stdout
    assert run(str(tmp_path / "run-user-2001")) == "unset XDG_RUNTIME_DIR\n"
    assert run(str(tmp_path)) == run(None) == ""


def test_the_spec_sets_only_the_communication_libraries_variables():
    import pytest

    from corral.errors import CorralError
    with pytest.raises(CorralError, match=r"cluster.yaml:5:\d+: fabric.env: 'LD_PRELOAD' is not a communication "
                                          r"library's variable"):
        load_text(SPEC + "fabric: {env: {LD_PRELOAD: /tmp/x.so}}\n", "cluster.yaml")
    assert env(hw(), "fabric: {env: {UCX_TLS: 'rc,sm', CUDA_DEVICE_MAX_CONNECTIONS: '1'}}\n")["UCX_TLS"] == "rc,sm"
