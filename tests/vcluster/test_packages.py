"""One package transaction per node (deploy/package_batch.py) on the shared cluster: the first apply
installed each node's packages in one `apt-get install` and the deploys' own package ops said so;
no policy-rc.d is left on any node; one left by a transaction killed hard is removed by the next
apply, which changes nothing else."""

from __future__ import annotations

import pytest

from corral.deploy.package_batch import POLICY, POLICY_TEXT
from corral.engine import journal
from corral.engine.chain import parts
from corral.workflows.converge import converge
from tests.vcluster.conftest import settled, ssh

pytestmark = pytest.mark.vcluster
BATCH = "packages | packages of the node's roles, in one transaction"


@pytest.fixture(scope="module")
def vc(shared_cluster):
    settled(shared_cluster, "test-packages-apply")
    return shared_cluster


def test_the_first_apply_installed_each_node_in_one_transaction(vc):
    runs = journal.recent(vc.cluster.state_dir, limit=1000)
    first = journal.get(vc.cluster.state_dir, next(r for r in reversed(runs) if r["mode"] == "apply")["run_id"])
    for name, node in first["nodes"].items():
        ops = {o["name"]: o for o in node["ops"]}
        batch = ops[BATCH]
        assert batch["status"] == "changed", (name, batch)
        installs = [c for c in batch["commands"] if "apt-get install" in c]
        assert len(installs) == 1 and "slurm" in installs[0] and "munge" in installs[0], batch["commands"]
        joined = [o for o in node["ops"] if (o.get("reason") or "").startswith("packages installed with the node's")]
        assert any(o["name"] == "munge | munge installed" for o in joined), [o["name"] for o in joined]
        apt_elsewhere = [o["name"] for o in node["ops"] if o["name"] != BATCH and o["status"] == "changed"
                         and any("apt-get install" in c and "munge" in c for c in o["commands"])]
        assert apt_elsewhere == [], apt_elsewhere
    for node in vc.cluster.nodes:
        assert ssh(vc, node.name, f"test -e {POLICY}", check=False).returncode == 1, node.name


def test_a_policy_left_by_a_killed_transaction_is_removed_and_nothing_else_changes(vc):
    pids = ssh(vc, "ctl", "systemctl show -p MainPID --value slurmctld slurmdbd").stdout.split()
    ssh(vc, "gpu01", f"printf %s '{POLICY_TEXT}' > {POLICY} && chmod 755 {POLICY}")
    plan = converge(vc.cluster, "plan", command="test-packages-stale-plan")
    changed = {n: [o.name for o in r.ops if o.status == "changed"] for n, r in plan.nodes.items()}
    assert changed["gpu01"] == [BATCH] and all(not c for n, c in changed.items() if n != "gpu01"), changed
    applied = converge(vc.cluster, "apply", command="test-packages-stale")
    assert applied.ok and applied.changed == 1, [(n, o.name) for n, r in applied.nodes.items() for o in r.ops
                                                 if o.status == "changed"]
    assert ssh(vc, "gpu01", f"test -e {POLICY}", check=False).returncode == 1
    assert ssh(vc, "ctl", "systemctl show -p MainPID --value slurmctld slurmdbd").stdout.split() == pids


def test_the_first_apply_ran_each_node_on_its_own_and_waited_only_where_it_must(vc):
    """The components' declared waits (components/) on real nodes: the compute nodes went on to their health checks and job hooks
    while the controller was still in its (longer) package transaction; slurmd's deploy began only once
    the controller's had ended, and says how long each compute node waited for it. An op's commands
    ran as one chain (engine/chain.py): slurmctld's start and its readiness wait are one command."""
    runs = journal.recent(vc.cluster.state_dir, limit=1000)
    first = journal.get(vc.cluster.state_dir, next(r for r in reversed(runs) if r["mode"] == "apply")["run_id"])
    spans = {p["name"]: p for p in first["timing"] if p["kind"] == "deploy"}
    packages, health = spans["packages"], spans["health"]
    controller, compute = spans["slurm controller"], spans["slurm compute"]
    assert health["start"] < packages["start"] + packages["s"], (health, packages)
    assert compute["start"] >= controller["start"] + controller["s"] - 0.01, (compute, controller)
    computes = [n.name for n in vc.cluster.with_role("compute")]
    assert compute["waited"] and set(compute["waited"]) <= set(computes), compute  # only nodes with slurmd waited
    start = next(o for o in first["nodes"]["ctl"]["ops"] if o["name"] == "slurm controller | slurmctld running")
    assert len(start["commands"]) == 1 and "systemctl restart slurmctld" in parts(start["commands"][0]), start
