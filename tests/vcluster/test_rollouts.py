"""NVIDIA driver lifecycle, OS package upgrades and the rollout policy on a real virtual cluster of 4
GPU nodes with TEST stand-in packages (corral-test-nvidia-driver 1.0, 1.1, a broken 1.2 and a 1.3
broken only on a node with a marker file; corral-test-tool 1.0, 1.1 asking for a reboot;
tests/vcluster/standin.py): the real apt flow, pinning, plan's "reboot + drain"
and its batches, and apply's drain -> wait for jobs -> install -> reboot (the nspawn nodes really
reboot) -> verify -> resume, batch after batch: a canary failing verification is rolled back and
nothing else is touched; a failure in batch 2 is rolled back and stops the rollout; all good, every
node is upgraded and no job runs on a node while it is being changed; package upgrades planned with
their versions and batches, rolled out with the reboot the package asks for, apt holds kept and
released (a package upgrade failing verification and its rollback: tests/unit/test_upgrade_rollout.py)."""

from __future__ import annotations

import time
from datetime import datetime

import pytest

from corral.cli.main import main
from corral.parallel import pmap
from corral.workflows.converge import converge
from corral.spec.loader import load
from corral.virtual.repo import start_server, stop_server
from tests.vcluster.conftest import TEST_SUBNET, make_spec, ssh, vcluster_unavailable, failures
from tests.vcluster.standin import BREAK_MARKER, PACKAGE, TOOL, build_repo, build_tool_deb, index_repo

pytestmark = pytest.mark.vcluster
PORT = 18081
NODES = ["gpu01", "gpu02", "gpu03", "gpu04"]
ALL_AT_ONCE = '{canary: 0, batch: "100%", drain_timeout: 60, reboot_timeout: 180}'
# verify_timeout 3 s: nvidia-smi is asked twice, 2 s apart, before a broken stand-in fails verification (a good one
# answers at the first ask: the reboot step waits for slurmd, long after the emulated driver loaded)
POLICY = '{canary: 1, batch: "50%", max_failed: 1, drain_timeout: 60, reboot_timeout: 180, verify_timeout: 3}'
# the package upgrades: canary, then the rest at once (two batches of reboots, not three: the batching itself
# is proven by the driver tests above)
THE_REST = POLICY.replace('batch: "50%"', 'batch: "100%"')
# two leaf switches under a spine (declared: the virtual nodes share one bridge; docs/components/fabric.md)
TOPOLOGY = """topology:
  switches:
    - {name: spine, switches: [leaf1, leaf2]}
    - {name: leaf1, nodes: "gpu[01-02]"}
    - {name: leaf2, nodes: "gpu[03-04]"}
"""
DRIVER = "nvidia:\n  driver: {{version: \"{v}\", package: " + PACKAGE + "}}\nrollout: {p}\n"


@pytest.fixture(scope="module")
def drv(tmp_path_factory):
    reason = vcluster_unavailable()
    if reason:
        pytest.skip(reason)
    from corral.virtual.cluster import VirtualCluster
    work = tmp_path_factory.mktemp("vcdrv")
    path = make_spec(work, name="cdrv", compute=4)
    base = path.read_text() + TOPOLOGY
    path.write_text(base + DRIVER.format(v="1.0", p=ALL_AT_ONCE))
    repo = build_repo(work / "test-repo", {"1.0": False, "1.1": False, "1.2": True, "1.3": "marker"})
    drivers_debs = sorted((repo / "pool").glob(f"{PACKAGE}_*.deb"))
    tools = {"1.0": build_tool_deb(repo, "1.0"), "1.1": build_tool_deb(repo, "1.1", asks_reboot=True)}
    index_repo(repo, drivers_debs)
    gateway = str(TEST_SUBNET.network_address + 1)
    vc = VirtualCluster(load(path))
    server = None
    try:
        vc.up()
        server = start_server(repo, gateway, PORT, work / "test-repo.log")
        on_each(vc, f"echo 'deb [trusted=yes] http://{gateway}:{PORT} ./' > /etc/apt/sources.list.d/corral-test.list")
        vc.base_spec = base  # noqa: B010 - the tests rewrite the driver section
        vc.offer = lambda versions: index_repo(repo, drivers_debs + [tools[v] for v in versions])  # noqa: B010
        yield vc
    finally:
        if server:
            stop_server(server)
        vc.down()


def set_version(vc, version: str, policy: str = POLICY, packages: str = ""):
    vc.cluster.path.write_text(vc.base_spec + DRIVER.format(v=version, p=policy) + packages)
    return load(vc.cluster.path)


def on_each(vc, command: str, check: bool = True) -> dict[str, str]:
    """`command` on every GPU node at once: node -> its stdout."""
    return dict(zip(NODES, pmap(lambda n: ssh(vc, n, command, check=check).stdout, NODES)))


def drivers(vc) -> dict[str, str]:
    return {n: out.strip() or "failing" for n, out in on_each(
        vc, "nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | sort -u", check=False).items()}


def slurm_states(vc) -> dict[str, str]:
    lines = ssh(vc, "ctl", "sinfo -h -N -o '%N|%T|%E'").stdout.split("\n")
    return {n: f"{s}|{r}" for n, s, r in (line.split("|", 2) for line in lines if line)}


def rollout_ops(result, node="gpu01"):
    return [(o.name.removeprefix("driver rollout | "), o.status) for o in result.nodes[node].ops
            if o.name.startswith("driver rollout")]


def in_service(vc) -> None:
    states = slurm_states(vc)
    assert all(states[n].startswith(("idle", "mixed", "allocated")) for n in NODES), states


def test_first_apply_installs_and_pins_the_driver_through_a_reboot(drv):
    assert set(drivers(drv).values()) == {"emulated"}  # no driver package yet
    result = converge(set_version(drv, "1.0", ALL_AT_ONCE), "apply", command="test-driver-1.0")
    assert result.ok, failures(result)
    for n in NODES:
        assert rollout_ops(result, n) == [("drain", "changed"), ("wait for jobs", "changed"), ("install", "changed"),
                                          ("reboot", "changed"), ("verify", "changed"), ("resume", "changed")]
    assert [(b["batch"], b["nodes"]) for b in result.rollouts] == [("batch 1", NODES)]  # canary 0, 100 %
    assert set(drivers(drv).values()) == {"1.0"}
    in_service(drv)
    assert not any(o.name.startswith("driver") for o in result.nodes["ctl"].ops)


def test_jobs_are_placed_under_one_leaf_switch(drv):
    """topology/tree from the spec: a 3-node job asking for one switch waits, every node idle, with Slurm's
    reason (no leaf has 3 nodes); two `-N2 --exclusive --switches=1` jobs each get the two nodes of a leaf."""
    topo = ssh(drv, "ctl", "scontrol show topology").stdout
    assert "SwitchName=leaf1" in topo and "Nodes=gpu[01-02]" in topo and "Switches=leaf[1-2]" in topo, topo

    def squeue(ids):
        out = ssh(drv, "ctl", f"squeue -h -j {','.join(ids)} -o '%i %T %N %r'").stdout
        return out, {r.split()[0]: r.split()[1:] for r in out.splitlines()}
    wide = ssh(drv, "ctl", "sbatch --parsable -N3 --exclusive --switches=1@10:00 -o /dev/null --wrap true").stdout.strip()
    jobs: list[str] = []
    try:
        for _ in range(60):
            out, rows = squeue([wide])
            if rows.get(wide, ["?"])[-1] not in ("?", "None"):
                break
            time.sleep(1)
        idle = ssh(drv, "ctl", "sinfo -h -N -t idle -o %N | sort -u").stdout.split()
        print("the wide job waits:", rows[wide], "idle:", idle)
        assert rows[wide] == ["PENDING", "Resources"] and idle == NODES, out  # Slurm names no other reason
        ssh(drv, "ctl", f"scancel {wide}")
        jobs = [ssh(drv, "ctl", "sbatch --parsable -N2 --exclusive --switches=1 -o /dev/null --wrap 'sleep 30'")
                .stdout.strip() for _ in range(2)]
        placed: dict[str, str] = {}
        for _ in range(60):
            out, rows = squeue(jobs)
            placed = {j: rows[j][1] for j in jobs if j in rows and rows[j][0] == "RUNNING"}
            if len(placed) == 2:
                break
            time.sleep(1)
        assert sorted(placed.values()) == ["gpu[01-02]", "gpu[03-04]"], out
    finally:
        ssh(drv, "ctl", f"scancel {' '.join([wide, *jobs])}", check=False)


def test_second_apply_changes_nothing(drv):
    result = converge(load(drv.cluster.path), "apply", command="test-driver-noop")
    assert result.ok and result.changed == 0, [(n, o.name) for n, r in result.nodes.items() for o in r.ops
                                               if o.status == "changed"]


def test_the_pin_holds_an_upgrade_back(drv):
    out = ssh(drv, "gpu01", "apt-get update -q >/dev/null; DEBIAN_FRONTEND=noninteractive apt-get install -y -q "
                            f"--only-upgrade {PACKAGE} 2>&1; dpkg-query -W -f '${{Version}}' {PACKAGE}").stdout
    assert out.endswith("1.0-1") and "1.1-1" in ssh(drv, "gpu01", f"apt-cache madison {PACKAGE}").stdout
    assert "Candidate: 1.0-1" in ssh(drv, "gpu01", f"apt-cache policy {PACKAGE}").stdout


def test_plan_shows_reboot_and_drain_and_the_batches(drv, capsys):
    set_version(drv, "1.2")
    assert main(["plan", "-f", str(drv.cluster.path)]) == 0
    out = capsys.readouterr().out
    assert "~ nvidia driver | NVIDIA driver 1.2  [reboot + drain]" in out
    assert f"{PACKAGE}: 1.0-1 -> 1.2\n      (drain, wait for jobs, install, reboot, verify, resume" in out
    assert ("driver rollout: canary gpu01 -> batch 2 gpu[02-03] -> batch 3 gpu04; stops at 1 failed node "
            "(any in the canary)") in out
    assert set(drivers(drv).values()) == {"1.0"}  # plan changed nothing
    in_service(drv)


def test_a_canary_failing_verification_is_rolled_back_and_nothing_else_is_touched(drv):
    result = converge(set_version(drv, "1.2"), "apply", command="test-driver-broken")
    assert not result.ok and result.nodes["ctl"].ok
    assert rollout_ops(result) == [
        ("drain", "changed"), ("wait for jobs", "changed"), ("install", "changed"), ("reboot", "changed"),
        ("verify", "failed"), ("rollback install", "changed"), ("rollback reboot", "changed"),
        ("rollback verify", "changed"), ("rollback resume", "changed")]
    error = result.nodes["gpu01"].error
    assert "verify failed: nvidia-smi failed" in error and error.endswith("(rolled back to 1.0, verified and resumed)")
    for n in ("gpu02", "gpu03", "gpu04"):
        assert rollout_ops(result, n) == [("not started", "skipped")] and result.nodes[n].ok
    assert any("stopped after the canary" in w for w in result.warnings)
    assert set(drivers(drv).values()) == {"1.0"}
    in_service(drv)


def test_a_failure_in_batch_two_is_rolled_back_and_stops_the_rollout(drv):
    ssh(drv, "gpu03", f"touch {BREAK_MARKER}")  # 1.3 does not load on gpu03
    result = converge(set_version(drv, "1.3"), "apply", command="test-driver-batch2")
    assert not result.ok
    assert [(b["batch"], b["nodes"], b["failed"]) for b in result.rollouts] == [
        ("canary", ["gpu01"], []), ("batch 2", ["gpu02", "gpu03"], ["gpu03"])]
    assert "rolled back to 1.0, verified and resumed" in result.nodes["gpu03"].error
    assert rollout_ops(result, "gpu04") == [("not started", "skipped")]
    assert drivers(drv) == {"gpu01": "1.3", "gpu02": "1.3", "gpu03": "1.0", "gpu04": "1.0"}
    in_service(drv)


def test_all_good_every_node_upgraded_and_no_job_runs_on_a_node_being_changed(drv):
    ssh(drv, "gpu03", f"rm -f {BREAK_MARKER}")
    first = ssh(drv, "ctl", "sbatch --parsable -A research -w gpu03 --gres=gpu:1 --wrap 'sleep 8'").stdout.strip()
    for _ in range(30):
        if ssh(drv, "ctl", f"squeue -h -j {first} -o %T").stdout.strip() == "RUNNING":
            break
        time.sleep(0.5)
    stream = ssh(drv, "ctl", "sbatch --parsable -A research --gres=gpu:1 --array=0-23 --wrap 'sleep 2'").stdout.strip()
    lines: list[tuple[float, str]] = []
    result = converge(set_version(drv, "1.3"), "apply", command="test-driver-1.3",
                      say=lambda line: lines.append((time.time(), line)))
    assert result.ok, failures(result)
    assert [(b["batch"], b["nodes"]) for b in result.rollouts] == [("canary", ["gpu03"]), ("batch 2", ["gpu04"])]
    assert [s for s, _ in rollout_ops(result, "gpu03")] == ["drain", "wait for jobs", "install", "reboot", "verify",
                                                            "resume"]
    assert ssh(drv, "ctl", f"sacct -n -X -j {first} -o State").stdout.split() == ["COMPLETED"]  # not cut off
    assert set(drivers(drv).values()) == {"1.3"}
    in_service(drv)
    # every job of the stream ran outside its node's drain..resume window
    windows = {}
    for t, line in lines:
        for n in ("gpu03", "gpu04"):
            if line.startswith(f"node {n}: driver rollout: drain:"):
                windows[n] = [t, None]
            elif line.startswith(f"node {n}: driver rollout: resume:"):
                windows[n][1] = t
    assert set(windows) == {"gpu03", "gpu04"} and all(w[1] for w in windows.values()), lines
    ssh(drv, "ctl", f"for i in $(seq 60); do squeue -h -j {stream} | grep -q . || break; sleep 1; done")
    rows = ssh(drv, "ctl", f"sacct -n -X -P -j {stream} -o NodeList,Start,End,State").stdout.split()
    ran = [r.split("|") for r in rows if r.endswith("|COMPLETED")]
    assert len(ran) == 24, rows
    for node, start, end, _ in ran:
        if node in windows:
            s, e = (datetime.fromisoformat(x).timestamp() for x in (start, end))
            drained, resumed = windows[node]
            # sacct's times are whole seconds (the true start is in [s, s + 1)) and the drain line is said
            # once the drain is done: a start within the drain's own second may have come just before it
            assert not (s >= drained and s < resumed - 1), (node, start, end, windows[node])


def test_a_driver_installed_but_not_running_is_rebooted_into(drv, capsys):
    # as after an upgrade outside corral: the spec's version on disk, another module still running
    ssh(drv, "gpu01", "sed -i 's/Module  [0-9.]*/Module  1.0/' /run/corral-emulated/proc-driver/nvidia/version")
    assert main(["plan", "-f", str(drv.cluster.path)]) == 0
    out = capsys.readouterr().out
    assert "~ nvidia driver | NVIDIA driver 1.3  [reboot + drain]" in out
    assert "nvidia kernel module: 1.0 running, 1.3 installed: reboot required" in out
    result = converge(load(drv.cluster.path), "apply", command="test-driver-loaded")
    assert result.ok, failures(result)
    assert [s for s, _ in rollout_ops(result)] == ["drain", "wait for jobs", "install", "reboot", "verify", "resume"]
    assert "Module  1.3 " in ssh(drv, "gpu01", "cat /proc/driver/nvidia/version").stdout
    in_service(drv)


# --- OS package upgrades under the same policy ------------------------------------------------

UPGRADE_ALL = "packages: {upgrade: all}\n"


def tool_versions(vc) -> dict[str, str]:
    return {n: out.strip() for n, out in on_each(vc, f"dpkg-query -W -f '${{Version}}' {TOOL}", check=False).items()}


def upgrade_ops(result, node):
    return [(o.name.removeprefix("package upgrade | "), o.status) for o in result.nodes[node].ops
            if o.name.startswith("package upgrade |")]


def test_package_upgrades_are_planned_then_rolled_out_with_the_reboot_asked_for(drv, capsys):
    drv.offer(["1.0"])  # corral-test-tool 1.0 installed outside corral, as any OS package
    on_each(drv, f"apt-get update -q >/dev/null 2>&1; DEBIAN_FRONTEND=noninteractive apt-get install -y -q "
                 f"{TOOL}=1.0-1 >/dev/null")
    drv.offer(["1.0", "1.1"])
    spec = set_version(drv, "1.3", THE_REST, UPGRADE_ALL)
    assert main(["plan", "-f", str(drv.cluster.path)]) == 0
    out = capsys.readouterr().out
    assert "~ package upgrades | apt upgrades  [drain + package upgrade]" in out
    assert f"{TOOL}: 1.0-1 -> 1.1-1" in out
    assert "package upgrade: canary gpu01 -> batch 2 gpu[02-04]" in out
    assert set(tool_versions(drv).values()) == {"1.0-1"}  # plan changed nothing
    result = converge(spec, "apply", command="test-upgrade-1.1")
    assert result.ok, "\n".join(f"{n}: {r.error}" for n, r in result.nodes.items() if r.error)
    for n in NODES:
        assert [s for s, _ in upgrade_ops(result, n)] == ["drain", "wait for jobs", "upgrade", "reboot", "verify",
                                                          "resume"], n
    assert [b["batch"] for b in result.rollouts if b["what"] == "package upgrade"] == ["canary", "batch 2"]
    assert set(tool_versions(drv).values()) == {"1.1-1"}
    in_service(drv)
    # every daemon bound to the node's address came back with the reboot (ordered after network-online.target,
    # render/restart.py): nothing left to start
    again = converge(load(drv.cluster.path), "apply", command="test-upgrade-noop")
    assert again.ok and again.changed == 0, "\n".join(
        [f"{n}: {r.error}" for n, r in again.nodes.items() if r.error]
        + [f"{n}: {o.name}: {o.reason}" for n, r in again.nodes.items() for o in r.ops if o.status in ("changed", "failed")])


def test_a_held_package_is_not_upgraded_and_the_hold_is_released_with_the_spec(drv, capsys):
    set_version(drv, "1.3", POLICY, f"packages: {{upgrade: all, hold: [{TOOL}]}}\n")
    result = converge(load(drv.cluster.path), "apply", command="test-upgrade-hold")
    assert result.ok, "\n".join(f"{n}: {r.error}" for n, r in result.nodes.items() if r.error)
    assert not any(o.name.startswith("package upgrade |") for r in result.nodes.values() for o in r.ops)
    assert all(out.split() == [TOOL] for out in on_each(drv, "apt-mark showhold").values())
    assert set(tool_versions(drv).values()) == {"1.1-1"}
    result = converge(set_version(drv, "1.3", POLICY), "apply", command="test-upgrade-unhold")
    assert result.ok and all(out.split() == [] for out in on_each(drv, "apt-mark showhold").values())


def test_a_discovered_fabric_becomes_the_topology(drv):
    """topology: {discover: infiniband}: apply installs infiniband-diags on the compute nodes and reads the
    fabric with ibnetdiscover while it prepares. The virtual nodes have no HCAs: the fabric is EMULATED by a
    stand-in ibnetdiscover on gpu01 (/usr/local/sbin, before the real one) printing
    tests/fixtures/fabric/virtual.txt. topology.conf becomes the discovered tree (slurmctld restarted, then
    reconfigured), Slurm shows it, and a second plan changes nothing."""
    import base64
    from pathlib import Path

    fabric = (Path(__file__).resolve().parents[1] / "fixtures" / "fabric" / "virtual.txt").read_text()
    spec = drv.cluster.path
    spec.write_text(spec.read_text().replace(TOPOLOGY, "topology: {discover: infiniband}\n"))
    from corral.components.views import packages_for
    drv.add_packages(packages_for(load(spec)))  # the served repository: + infiniband-diags
    script = ("#!/bin/sh\n# corral TEST stand-in: an emulated fabric (the virtual nodes have no HCAs)\n"
              f"cat <<'EOF'\n{fabric}EOF\n")
    ssh(drv, "gpu01", f"install -d /usr/local/sbin && echo {base64.b64encode(script.encode()).decode()} | base64 -d "
                      "> /usr/local/sbin/ibnetdiscover && chmod 755 /usr/local/sbin/ibnetdiscover")
    result = converge(load(spec), "apply", command="test-fabric-discover")
    assert result.ok, failures(result)
    ctl_ops = {o.name: o for o in result.nodes["ctl"].ops}
    config = next(o for name, o in ctl_ops.items() if name.startswith("slurm controller | slurm.conf"))
    assert config.status == "changed" and "the network topology changed" in (config.disruption or ""), config
    conf = ssh(drv, "ctl", "grep -v '^#' /etc/slurm/topology.conf").stdout.split()
    assert conf == ["SwitchName=leaf01", "Nodes=gpu[01-02]", "SwitchName=leaf02", "Nodes=gpu[03-04]",
                    "SwitchName=spine", "Switches=leaf[01-02]"], conf
    assert "# discovered from ibnetdiscover on gpu01" in ssh(drv, "ctl", "cat /etc/slurm/topology.conf").stdout
    assert "SwitchName=leaf01" in ssh(drv, "ctl", "scontrol show topology").stdout
    assert all(out == "install ok installed"
               for out in on_each(drv, "dpkg-query -W -f '${Status}' infiniband-diags").values())
    again = converge(load(spec), "plan", command="test-fabric-noop")
    assert again.ok and again.changed == 0, [(n, o.name) for n, r in again.nodes.items() for o in r.ops
                                             if o.status != "unchanged"]
