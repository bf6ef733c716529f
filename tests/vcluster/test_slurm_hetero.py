"""Heterogeneous GPUs (one group h100 x 4, one group a100 x 2): typed GRES and features per group;
--constraint and --gres=gpu:<type>:N land on the right nodes. The cluster has a backup controller
(ctl2) with slurmctld's state on the emulated NAS: the backup takes over when the primary stops and
hands back when it returns."""

from __future__ import annotations

import json

import pytest

from corral.workflows.converge import converge
from corral.spec.loader import load
from tests.vcluster.conftest import TEST_BRIDGE, TEST_PORT, TEST_SUBNET, ssh, vcluster_unavailable, failures

pytestmark = pytest.mark.vcluster
NET = str(TEST_SUBNET.network_address)[:-2]  # "10.213.77"
TAKEOVER_S = 10  # SlurmctldTimeout: how long the backup controller waits for the primary
SPEC = f"""\
name: hetero
ssh: {{user: root, key: .corral/ssh/id_ed25519}}
nodes:
  - {{names: ctl, addresses: [{NET}.10], roles: [controller, accounting]}}
  - {{names: ctl2, addresses: [{NET}.9], roles: [controller]}}
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
  state_save_location: /srv/slurmctld-state
  slurmctld_timeout_s: {TAKEOVER_S}
storage:
  mounts:
    - {{path: /srv/slurmctld-state, server: nas1, export: /export/slurmstate, roles: [controller]}}
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
        assert result.ok, json.dumps({n: [x.error] + [f"{o.name}: {o.reason}: {o.stderr_tail[-1500:]}" for o in x.ops
                                             if o.status == "failed"] for n, x in result.nodes.items() if x.error},
                                     indent=1)
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
    assert result.ok, failures(result)
    conf = ssh(vc, "ctl", "cat /etc/slurm/slurm.conf").stdout
    assert "Prolog=" not in conf and "missing on cpu1" in conf
    assert ssh(vc, "ctl", "srun -N1 -w hopper1 hostname").stdout.strip() == "hopper1"  # the rest still runs jobs
    result = converge(load(spec), "apply", command="test-all")
    assert result.ok, failures(result)
    assert "Prolog=/usr/local/sbin/corral-prolog" in ssh(vc, "ctl", "cat /etc/slurm/slurm.conf").stdout
    assert ssh(vc, "ctl", "srun -N1 -w cpu1 hostname").stdout.strip() == "cpu1"
    assert ssh(vc, "ctl", "sinfo -h -n cpu1 -o %T").stdout.strip() == "idle"


def _ping(vc, node: str) -> str:
    return ssh(vc, node, "scontrol ping", check=False).stdout


def test_backup_controller_takes_over_and_hands_back(hetero):
    """slurmctld stopped on the primary: the backup answers and accepts jobs within SlurmctldTimeout +
    10 s, a running job finishes, the queue is intact; the primary started again takes control back."""
    import time
    ping = _ping(hetero, "ctl")
    assert "Slurmctld(primary) at ctl is UP" in ping and "Slurmctld(backup) at ctl2 is UP" in ping, ping
    for node in ("ctl", "ctl2"):  # one directory (the NAS), the same slurm user (uid) on both
        assert ssh(hetero, node, "stat -c '%U %u' /srv/slurmctld-state").stdout.split() == ["slurm", "64030"]
    running = ssh(hetero, "ctl", "sbatch --parsable -N1 -w hopper1 --wrap 'sleep 25'").stdout.strip()
    held = ssh(hetero, "ctl", "sbatch --parsable --hold --wrap 'sleep 600'").stdout.strip()
    new = ""
    try:
        for _ in range(40):
            if ssh(hetero, "ctl", f"squeue -h -j {running} -o %T").stdout.strip() == "RUNNING":
                break
            time.sleep(0.5)
        start = time.monotonic()
        ssh(hetero, "ctl", "systemctl stop slurmctld")
        while time.monotonic() - start < TAKEOVER_S + 10:
            new = ssh(hetero, "ctl2", "sbatch --parsable --hold --wrap true", check=False).stdout.strip()
            if new:
                break
            time.sleep(0.5)
        took = time.monotonic() - start
        assert new, f"the backup accepted no job within {TAKEOVER_S + 10} s: {_ping(hetero, 'ctl2')}"
        assert "Slurmctld(backup) at ctl2 is UP" in _ping(hetero, "ctl2")
        queue = dict(line.split() for line in ssh(hetero, "ctl2", "squeue -h -o '%i %T'").stdout.splitlines() if line)
        assert queue.get(held) == "PENDING" and queue.get(running) in ("RUNNING", "COMPLETING", None), queue
        for _ in range(60):  # the running job ends under the backup controller
            state = ssh(hetero, "ctl2", f"sacct -n -X -P -j {running} -o State", check=False).stdout.strip()
            if state == "COMPLETED":
                break
            time.sleep(1)
        assert state == "COMPLETED", state
        ssh(hetero, "ctl", "systemctl start slurmctld")
        for _ in range(60):  # control returns to the primary, the queue with it
            if "Slurmctld(primary) at ctl is UP" in _ping(hetero, "ctl"):
                break
            time.sleep(1)
        assert "Slurmctld(primary) at ctl is UP" in _ping(hetero, "ctl")
        ids = ssh(hetero, "ctl", "squeue -h -o %i").stdout.split()
        assert held in ids and new in ids, ids
        print(f"takeover in {took:.1f} s")
    finally:
        ssh(hetero, "ctl", "systemctl start slurmctld", check=False)
        ssh(hetero, "ctl", f"scancel {held} {new}", check=False)
