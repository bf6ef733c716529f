"""`corral validate --fabric` (checks/fabric.py, fabric_parse.py): ib_write_bw's output, the pairs along the
topology, and the check's verdicts through the Run seam (a fake controller answering as srun would)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from corral.checks.fabric import VIRTUAL, fabric_checks, pairs
from corral.checks.fabric_parse import parse_ib_write_bw
from corral.errors import CorralError
from corral.facts.records import NodeHW
from corral.spec.loader import load, load_text

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "fabric"
GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "render"
OUTPUT = (FIXTURES / "ib_write_bw_client.txt").read_text()


def test_the_result_row_in_gb_and_mb():
    got = parse_ib_write_bw(OUTPUT)
    assert (got.size, got.avg_gbps) == (65536, 389.25)
    mb = " #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]\n 65536      5000   12000.00   11500.50   0.18\n"
    assert parse_ib_write_bw(mb).avg_gbps == 92.0
    with pytest.raises(CorralError, match="no ib_write_bw result in the output .got 'Unable to open file descriptor for socket connection'"):
        parse_ib_write_bw("1:  Couldn't connect to 10.0.0.11:18515\n1: Unable to open file descriptor for socket connection")


def test_pairs_follow_the_topology():
    tree = load(GOLDEN / "fabric_tree" / "cluster.yaml")
    assert pairs(tree, None, 16) == [
        ("within leaf01", "gpu01", "gpu02"), ("within leaf02", "gpu05", "gpu06"), ("within leaf03", "gpu09", "gpu10"),
        ("within leaf04", "gpu13", "gpu14"), ("across leaf01 / leaf02", "gpu01", "gpu05"),
        ("across leaf02 / leaf03", "gpu05", "gpu09"), ("across leaf03 / leaf04", "gpu09", "gpu13"),
        ("across leaf04 / off-fabric", "gpu13", "gpu17")][:16]
    assert len(pairs(tree, None, 3)) == 3
    flat = load_text("name: t\nnodes:\n  - {names: ctl, addresses: [10.0.0.10], roles: [controller]}\n"
                     "  - {names: 'gpu[01-05]', addresses: '10.0.0.[11-15]', roles: [compute]}\n", "c.yaml")
    assert pairs(flat, None, 16) == [("neighbours", "gpu01", "gpu02"), ("neighbours", "gpu03", "gpu04")]


SPEC = """name: t
nodes:
  - {names: ctl, addresses: [10.0.0.10], roles: [controller]}
  - {names: "gpu[01-02]", addresses: "10.0.0.[11-12]", roles: [compute]}
"""


def hw(*rdma: str) -> NodeHW:
    return NodeHW(cpus=8, sockets=1, cores_per_socket=8, threads_per_core=1, memory_mb=1000, rdma=rdma)


class Ctl:
    def __init__(self, stdout: str, rc: int = 0):
        self.stdout, self.rc, self.commands = stdout, rc, []

    def __call__(self, node, command, **kw):
        self.commands.append((node, command))
        return subprocess.CompletedProcess(command, self.rc, self.stdout, "")


def test_a_pair_is_judged_against_the_floor():
    cluster = load_text(SPEC, "c.yaml")
    facts = {"gpu01": hw("mlx5_0:1:ACTIVE:InfiniBand:400"), "gpu02": hw("mlx5_1:1:ACTIVE:InfiniBand:400")}
    ctl = Ctl(OUTPUT)
    checks, extra = fabric_checks(cluster, ctl, "ctl", facts, {}, {})
    assert [c.status for c in checks] == ["OK"], checks
    assert extra["pairs"] == [{"what": "neighbours", "a": "gpu01", "b": "gpu02", "hca_a": "mlx5_0:1",
                               "hca_b": "mlx5_1:1", "floor_gbps": 320.0, "gbps": 389.25, "status": "OK"}]
    command = ctl.commands[0][1]
    assert "srun -J corral-validate" in command and "-N2 --exclusive -l -w gpu01,gpu02" in command
    assert "ib_write_bw -d mlx5_0" in command and "ib_write_bw -d mlx5_1" in command and "10.0.0.11" in command
    strict = load_text(SPEC + "fabric: {ib_write_bw_floor_gbps: 395}\n", "c.yaml")
    check = fabric_checks(strict, Ctl(OUTPUT), "ctl", facts, {}, {})[0][0]
    assert check.status == "FAIL" and "389.25 Gb/s < floor 395" in check.message
    failed = fabric_checks(cluster, Ctl("1:  Couldn't connect to 10.0.0.11:18515\n", rc=1), "ctl", facts, {}, {})[0][0]
    assert failed.status == "FAIL" and "ib_write_bw failed (rc=1)" in failed.message
    down = fabric_checks(cluster, Ctl(OUTPUT), "ctl", facts, {}, {"gpu02": "unreachable"})[0][0]
    assert down.status == "FAIL" and "not tested (unreachable)" in down.message


def test_skipped_with_the_reason():
    cluster = load_text(SPEC, "c.yaml")
    assert fabric_checks(cluster, Ctl(""), "ctl", {"gpu01": hw()}, {}, {})[0][0].message.startswith(
        "no compute node has an active RDMA port")
    assert fabric_checks(cluster, Ctl(""), "ctl", {}, {}, {}, jobs=False)[0][0].message == "--skip-jobs: read-only run"
    virtual = load_text(SPEC.replace("10.0.0.", "10.213.90.") + "virtual: {subnet: 10.213.90.0/24}\n", "c.yaml")
    assert fabric_checks(virtual, Ctl(""), "ctl", {}, {}, {})[0][0].message == VIRTUAL
