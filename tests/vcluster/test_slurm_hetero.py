"""Heterogeneous GPUs (one group h100 x 4, one group a100 x 2): typed GRES and features per group;
--constraint and --gres=gpu:<type>:N land on the right nodes."""

from __future__ import annotations

import json

import pytest

from corral.workflows.converge import converge
from corral.spec.loader import load
from tests.vcluster.conftest import TEST_BRIDGE, TEST_PORT, TEST_SUBNET, ssh, vcluster_unavailable

pytestmark = pytest.mark.vcluster
NET = str(TEST_SUBNET.network_address)[:-2]  # "10.213.77"
SPEC = f"""\
name: hetero
ssh: {{user: root, key: .corral/ssh/id_ed25519}}
nodes:
  - {{names: ctl, addresses: [{NET}.10], roles: [controller, accounting]}}
  - names: hopper1
    addresses: [{NET}.11]
    roles: [compute]
    gpus: {{model: h100, count: 4, nvlink: true}}
  - names: ampere1
    addresses: [{NET}.12]
    roles: [compute]
    gpus: {{model: a100, count: 2}}
slurm:
  partitions: [{{name: all, nodes: ALL, default: true}}]
virtual: {{subnet: {TEST_SUBNET}, bridge: {TEST_BRIDGE}, repo_port: {TEST_PORT}}}
"""


@pytest.fixture(scope="module")
def hetero(tmp_path_factory):
    reason = vcluster_unavailable()
    if reason:
        pytest.skip(reason)
    from corral.virtual.cluster import VirtualCluster
    d = tmp_path_factory.mktemp("hetero")
    (d / "cluster.yaml").write_text(SPEC)
    vc = VirtualCluster(load(d / "cluster.yaml"))
    try:
        vc.up()
        result = converge(vc.cluster, "apply")
        assert result.ok, json.dumps(result.to_json(), indent=1)[:3000]
        yield vc
    finally:
        vc.down()


def test_typed_gres_and_features_per_group(hetero):
    out = ssh(hetero, "ctl", "sinfo -h -N -o '%N %G %f'").stdout.split("\n")
    rows = {line.split()[0]: line.split()[1:] for line in out if line.strip()}
    assert rows["hopper1"][0] == "gpu:h100:4(S:0)" and rows["ampere1"][0] == "gpu:a100:2(S:0)"
    assert {"h100", "hopper", "nvlink"} <= set(rows["hopper1"][1].split(","))
    assert {"a100", "ampere"} <= set(rows["ampere1"][1].split(","))
    tres = ssh(hetero, "ctl", "scontrol show config | grep AccountingStorageTRES").stdout
    assert "gres/gpu:a100" in tres and "gres/gpu:h100" in tres


@pytest.mark.parametrize("request_args, node", [
    ("--constraint=a100", "ampere1"), ("--constraint=hopper", "hopper1"),
    ("--gres=gpu:a100:1", "ampere1"), ("--gres=gpu:h100:3", "hopper1"),
])
def test_requests_land_on_the_right_nodes(hetero, request_args, node):
    out = ssh(hetero, "ctl", f"srun -N1 {request_args} bash -c 'echo $(hostname) $CUDA_VISIBLE_DEVICES'").stdout
    assert out.split()[0] == node


def test_a100_request_beyond_the_group_is_refused(hetero):
    proc = ssh(hetero, "ctl", "srun -N1 --gres=gpu:a100:3 hostname", check=False)
    assert proc.returncode != 0 and "Requested node configuration is not available" in proc.stderr


def test_a_new_node_never_meets_a_prolog_it_does_not_have(hetero):
    """Applied through the controller alone, a new compute node is in slurm.conf but lacks corral's
    Prolog: slurm.conf names none until it has it (a missing Prolog drains a node at its first job)."""
    from corral.virtual.cluster import VirtualCluster
    spec = hetero.cluster.path
    spec.write_text(spec.read_text().replace("slurm:\n", f"  - {{names: cpu1, addresses: [{NET}.13], roles: [compute]}}\n"
                                                          "slurm:\n", 1))
    vc = VirtualCluster(load(spec))
    vc.up()
    result = converge(vc.cluster, "apply", limit=["ctl"], command="test-ctl-only")
    assert result.ok, json.dumps(result.to_json(), indent=1)[:3000]
    conf = ssh(vc, "ctl", "cat /etc/slurm/slurm.conf").stdout
    assert "Prolog=" not in conf and "missing on cpu1" in conf
    assert ssh(vc, "ctl", "srun -N1 -w hopper1 hostname").stdout.strip() == "hopper1"  # the rest still runs jobs
    result = converge(load(spec), "apply", command="test-all")
    assert result.ok, json.dumps(result.to_json(), indent=1)[:3000]
    assert "Prolog=/usr/local/sbin/corral-prolog" in ssh(vc, "ctl", "cat /etc/slurm/slurm.conf").stdout
    assert ssh(vc, "ctl", "srun -N1 -w cpu1 hostname").stdout.strip() == "cpu1"
    assert ssh(vc, "ctl", "sinfo -h -n cpu1 -o %T").stdout.strip() == "idle"
