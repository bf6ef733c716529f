"""The engine end to end on real virtual nodes: apply, zero-change re-run, drift in plan, a node
that cannot be reached fails alone, and every run is journaled."""

from __future__ import annotations

import pytest

from tests.smoke.check import check_smoke
from corral.cli.main import main
from tests.smoke.deploy import smoke
from corral.engine import journal, run
from tests.vcluster.conftest import ssh, vcluster_unavailable

pytestmark = pytest.mark.vcluster
NODES = ["ctl", "gpu01", "gpu02"]


@pytest.fixture(scope="module", autouse=True)
def memcached_in_the_repository():
    """The smoke deploy installs memcached, which no corral component declares: the served repository
    gets it before the module's cluster boots (a fresh machine's repository lacks it)."""
    if not vcluster_unavailable():
        from corral.virtual import image, repo
        from corral.virtual.defaults import VIRTUAL_OS  # the release of the module's cluster (make_spec's)
        repo.ensure_repo(image.ensure_image(os_name=VIRTUAL_OS), ["memcached"], repo.repo_dir(VIRTUAL_OS),
                         os_name=VIRTUAL_OS)


def memcached_pids(vc) -> dict[str, str]:
    return {n: ssh(vc, n, "systemctl show -p MainPID --value memcached").stdout.strip() for n in NODES}


def test_apply_converges_every_node(vcluster):
    result = run(vcluster.cluster, [smoke], mode="apply", command="test-apply")
    assert result.ok, result.to_json()
    for n in NODES:
        assert result.nodes[n].count("changed") >= 2  # package + templated file at least
    # a per-node value from the spec reached each node, and the service answers there
    for n in NODES:
        conf = ssh(vcluster, n, "cat /etc/memcached.conf").stdout
        assert f"-l {vcluster.cluster.node(n).address}" in conf and n in conf
        assert ssh(vcluster, n, "systemctl is-enabled memcached").stdout.strip() == "enabled"
    assert all(c.ok for c in check_smoke(vcluster.cluster)), check_smoke(vcluster.cluster)


def test_second_apply_changes_nothing_and_restarts_nothing(vcluster):
    before = memcached_pids(vcluster)
    result = run(vcluster.cluster, [smoke], mode="apply", command="test-noop")
    assert result.ok and result.changed == 0, result.to_json()
    for node in result.nodes.values():
        assert all(op.reason for op in node.ops if op.status == "unchanged")  # every no-op says why
    assert memcached_pids(vcluster) == before


def test_plan_shows_drift_and_changes_nothing(vcluster):
    ssh(vcluster, "gpu01", "sed -i 's/^-m .*/-m 999/' /etc/memcached.conf")
    plan = run(vcluster.cluster, [smoke], mode="plan", command="plan").to_json()
    changed = {n: [o["name"] for o in d["ops"] if o["status"] == "changed"] for n, d in plan["nodes"].items()}
    assert changed["ctl"] == [] and changed["gpu02"] == []
    assert any("memcached configured" in name for name in changed["gpu01"])
    assert "-m 999" in ssh(vcluster, "gpu01", "cat /etc/memcached.conf").stdout  # plan changed nothing


def test_unreachable_node_fails_alone(vcluster, capsys):
    vcluster.node("gpu02").stop()
    try:
        # a stopped node's address answers nothing: the connect waits out its timeout (10 s by default)
        result = run(vcluster.cluster, [smoke], mode="apply", command="test-unreachable", connect_timeout=3)
        assert not result.ok and result.failed_nodes == ["gpu02"]
        down = result.nodes["gpu02"]
        assert not down.reachable and "gpu02" in down.error
        # the others converged: gpu01's drift was repaired and memcached restarted for it
        assert result.nodes["gpu01"].ok and result.nodes["gpu01"].count("changed") >= 1
        assert "-m 999" not in ssh(vcluster, "gpu01", "cat /etc/memcached.conf").stdout
        assert result.nodes["ctl"].ok and result.nodes["ctl"].count("changed") == 0
        # the CLI says so with exit code 1
        assert main(["plan", "-f", str(vcluster.cluster.path)]) == 1
        assert "gpu02" in capsys.readouterr().out
    finally:
        vcluster.up()  # start what is missing again
    again = run(vcluster.cluster, [smoke], mode="apply", command="test-rejoin")
    assert again.ok and again.nodes["gpu02"].count("changed") == 0


def test_runs_are_journaled(vcluster):
    runs = journal.recent(vcluster.cluster.state_dir, limit=50)
    commands = [r["command"] for r in runs]
    for expected in ("test-apply", "test-noop", "plan", "test-unreachable", "test-rejoin"):
        assert expected in commands
    assert all(r["spec_hash"] == vcluster.cluster.spec_hash() for r in runs)
    failed = next(r for r in runs if r["command"] == "test-unreachable")
    assert not failed["ok"]


def test_the_first_apply_says_where_its_time_went(vcluster, capsys):
    """The first apply installed memcached on every node: its journaled timing has the install share,
    the smoke deploy as a phase, and `corral history --timing` shows the same."""
    from corral.engine.timing import breakdown
    first = next(r for r in journal.recent(vcluster.cluster.state_dir, limit=50) if r["command"] == "test-apply")
    row = journal.get(vcluster.cluster.state_dir, first["run_id"])
    kinds = [p["kind"] for p in row["timing"]]
    assert kinds[:2] == ["connect", "prepare"] and "deploy" in kinds
    time = breakdown(row)
    assert time["categories"]["install"] > 0, time["categories"]
    slowest = time["slowest_ops"][0]
    assert slowest["category"] == "install" and slowest["node"] in NODES, slowest
    assert main(["history", "-f", str(vcluster.cluster.path), "--run", first["run_id"], "--timing"]) == 0
    text = capsys.readouterr().out
    assert "where" in text and "install" in text and slowest["op"] in text
