"""`corral fanout` on the shared cluster: the node-local deploys (health, job hooks) converged by
corral itself on each compute node, started through one Slurm allocation from the controller
(salloc, sbcast of the runtime and the snapshot, srun): the same operations as over SSH, a hand
change put back on the node that had it only, nothing left behind (no job, no snapshot, no tarball),
and a busy node refused at once with Slurm's reason."""

from __future__ import annotations

import json

import pytest

from corral.cli.main import main
from corral.fanout import runtime
from tests.vcluster.conftest import settled, ssh

pytestmark = pytest.mark.vcluster
CONFIG = "/etc/corral/health.json"


@pytest.fixture(scope="module")
def vc(shared_cluster):
    settled(shared_cluster, "test-fanout-apply")
    return shared_cluster


def fanout(vc, capsys, *args) -> tuple[int, dict]:
    rc = main(["fanout", "-f", str(vc.cluster.path), "--json", *args])
    return rc, json.loads(capsys.readouterr().out)


def ops(data: dict, node: str) -> dict[str, str]:
    return {o["name"]: o["status"] for o in data["nodes"][node]["ops"]}


def test_fanout_through_slurm_runs_the_same_operations_and_puts_a_hand_change_back(vc, capsys):
    rc, first = fanout(vc, capsys)  # the first one also sends the runtime
    assert rc == 0 and first["ok"], json.dumps(first, indent=1)[:3000]
    assert first["command"] == "fanout (slurm)" and sorted(first["nodes"]) == ["gpu01", "gpu02"]
    assert all(t["changed"] == 0 for t in first["totals"].values()), first["totals"]  # converged by apply
    rc, by_ssh = fanout(vc, capsys, "--via", "ssh", "--plan")
    assert rc == 0 and by_ssh["command"] == "fanout (ssh)"
    for node in ("gpu01", "gpu02"):  # the same operations, whichever way they travel
        assert set(ops(first, node)) == set(ops(by_ssh, node)) and len(ops(first, node)) >= 10
    srun = next(p for p in first["timing"] if p["name"] == "srun")
    assert set(srun["nodes"]) == {"gpu01", "gpu02"} and all(v["cpu_s"] > 0 for v in srun["nodes"].values())

    ssh(vc, "gpu01", f"echo '# changed by hand' >> {CONFIG}")
    rc, fixed = fanout(vc, capsys)
    assert rc == 0 and fixed["ok"]
    assert ops(fixed, "gpu01")[f"health | {CONFIG}"] == "changed"
    assert fixed["totals"]["gpu01"]["changed"] == 1 and fixed["totals"]["gpu02"]["changed"] == 0
    assert "changed by hand" not in ssh(vc, "gpu01", f"cat {CONFIG}").stdout

    rid = runtime.build(vc.cluster.state_dir).id
    for node in ("gpu01", "gpu02"):  # the runtime stays unpacked; no tarball, no snapshot left
        left = ssh(vc, node, "ls /var/lib/corral/fanout /var/lib/corral/runtime").stdout.split()
        assert rid in left and not [f for f in left if f.endswith((".json", ".tar.gz"))], left
    assert not [f for f in ssh(vc, "ctl", "ls /var/lib/corral/fanout").stdout.split() if f.endswith(".json")]
    assert ssh(vc, "ctl", "squeue -h -n corral-fanout").stdout.strip() == ""
    history = main(["history", "-f", str(vc.cluster.path), "--json"])
    runs = json.loads(capsys.readouterr().out)
    assert history == 0 and runs[0]["command"] == "fanout (slurm)" and runs[0]["ok"]


def test_a_busy_node_is_refused_at_once_with_slurms_reason(vc, capsys, monkeypatch):
    from corral.fanout import slurm as fanout_slurm
    monkeypatch.setattr(fanout_slurm, "ALLOC_S", 4)  # the allocation's window (15 s): shorter for the test
    job = ssh(vc, "ctl", "sbatch --parsable --exclusive -w gpu02 -t 2 --wrap 'sleep 120'").stdout.strip()
    try:
        ssh(vc, "ctl", f"for i in $(seq 40); do [ \"$(squeue -h -j {int(job)} -o %T)\" = RUNNING ] && break; sleep 0.5; done")
        rc, data = fanout(vc, capsys)
        assert rc == 1 and not data["ok"]
        for node in ("gpu01", "gpu02"):  # one allocation for all: none changed, each says why
            assert "no allocation of the nodes" in data["nodes"][node]["error"], data["nodes"][node]
        assert ssh(vc, "ctl", "squeue -h -n corral-fanout").stdout.strip() == ""
    finally:
        ssh(vc, "ctl", f"scancel {int(job)}")
        ssh(vc, "ctl", "for i in $(seq 60); do [ -z \"$(squeue -h -w gpu02)\" ] && break; sleep 0.5; done")
