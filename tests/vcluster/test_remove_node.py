"""Taking a node out of the spec on a real virtual cluster of its own (ctl + gpu01-03 x 4 emulated H100):
plan names it with its running job; apply drains it, waits for the job (it completes), takes it out of
slurm.conf (slurmctld restarted, then reconfigure: gpu01/gpu02 keep their slurmd, 0 changes) and stops
its daemons, its files left; put back, it comes back idle; `apply --force` cancels its job instead."""

from __future__ import annotations

import ipaddress
import json
import threading
import time

import pytest

from corral.cli.main import main
from corral.engine import node_record
from corral.spec.loader import load
from corral.workflows.converge import converge
from corral.workflows.removal import DISRUPTION
from tests.vcluster.conftest import make_spec, ssh, started, vcluster_unavailable, failures

pytestmark = pytest.mark.vcluster
# a subnet, bridge, port and name of this module's own (conftest: 77/corraltest0/18080, 78/corraltest1/18082)
SUBNET, BRIDGE, PORT = ipaddress.IPv4Network("10.213.86.0/24"), "corraltest6", 18096
NET = str(SUBNET.network_address)[:-2]  # "10.213.86"
DRAIN_TIMEOUT_S = 90  # how long apply waits for gpu03's jobs (workflows/removal.py drain_timeout_s reads it)
DRAIN = f"rollout: {{drain_timeout: {DRAIN_TIMEOUT_S}}}\n"
ALL, WITHOUT = ("gpu[01-03]", f"{NET}.11-{NET}.13"), ("gpu[01-02]", f"{NET}.11-{NET}.12")
# the job on gpu03 ends when this file is there: made HOLD_S after apply said it waits for the node's jobs
RELEASE, HOLD_S = "/var/tmp/corral-test-release", 3
# what a removed node keeps: corral's files, the munge key, Slurm's packages and state directory
KEPT = ("test -f /etc/systemd/system/slurmd.service.d/corral.conf && test -f /etc/munge/munge.key && "
        "test -d /var/lib/slurm/slurmd && dpkg -s slurmd >/dev/null && echo kept")


@pytest.fixture(scope="module")
def vc(tmp_path_factory):
    """The cluster with gpu03; its VirtualCluster keeps gpu03 running (and stops it at the end) while
    the spec on disk goes without it and back."""
    reason = vcluster_unavailable()
    if reason:
        pytest.skip(reason)
    from corral.virtual.cluster import VirtualCluster
    path = make_spec(tmp_path_factory.mktemp("remove"), name="cremove", compute=3, subnet=SUBNET, bridge=BRIDGE,
                     port=PORT)
    path.write_text(path.read_text() + DRAIN)
    vc = VirtualCluster(load(path))
    try:
        vc.up()
        result = converge(vc.cluster, "apply", command="test-remove-deploy")
        assert result.ok, failures(result)
        _idle(vc, ["gpu01", "gpu02", "gpu03"])
        yield vc
    finally:
        vc.down()


def _spec(vc, names: tuple[str, str]):
    """The spec on disk with these compute nodes; the Cluster loaded from it."""
    text = vc.cluster.path.read_text()
    for old in (ALL, WITHOUT):
        text = text.replace(old[0], names[0]).replace(old[1], names[1])
    vc.cluster.path.write_text(text)
    return load(vc.cluster.path)


def _idle(vc, nodes: list[str], within: float = 60) -> None:
    deadline = time.monotonic() + within
    while True:
        rows = dict(line.split() for line in ssh(vc, "ctl", "sinfo -h -N -o '%N %T'").stdout.splitlines())
        if all(rows.get(n) == "idle" for n in nodes) or time.monotonic() > deadline:
            break
        time.sleep(1)
    assert all(rows.get(n) == "idle" for n in nodes) and set(rows) == set(nodes), rows


def _job_on_gpu03(vc, until: str = "false") -> str:
    """A running job on gpu03 that ends when the file `until` is there (never, by default)."""
    wrap = f"while [ ! -e {until} ]; do sleep 1; done" if until != "false" else "sleep 600"
    job = ssh(vc, "ctl", f"sbatch --parsable -w gpu03 -N1 --gres=gpu:1 --wrap '{wrap}'").stdout.strip()
    for _ in range(30):
        if ssh(vc, "ctl", f"squeue -h -j {job} -o %T").stdout.strip() == "RUNNING":
            return job
        time.sleep(0.5)
    raise AssertionError(f"job {job} did not start on gpu03")


def _accounted(vc, job: str) -> str:
    for _ in range(40):  # slurmdbd records the end shortly after
        state = ssh(vc, "ctl", f"sacct -n -X -P -j {job} -o State").stdout.strip()
        if state and state not in ("RUNNING", "PENDING", "COMPLETING"):
            return state
        time.sleep(0.5)
    return state


def test_removed_node_is_drained_waited_for_then_out_of_slurm_with_its_daemons_stopped(vc, capsys):
    job = _job_on_gpu03(vc, until=RELEASE)
    starts = {n: started(vc, n, "slurmd") for n in ("gpu01", "gpu02")}
    ctld = started(vc, "ctl", "slurmctld")
    without = _spec(vc, WITHOUT)
    # plan: the removal with its running job, as text and JSON; nothing changed
    assert main(["plan", "--json", "-f", str(without.path)]) == 0
    planned = json.loads(capsys.readouterr().out)["nodes"]["gpu03"]["ops"]
    assert [(o["name"], o["status"], o["disruption"]) for o in planned] == [("remove node", "changed", DISRUPTION)]
    assert planned[0]["reason"].startswith("1 running job(s): apply drains it, waits up to 90 s")
    assert "DRAIN" not in ssh(vc, "ctl", "scontrol show node gpu03").stdout
    # apply waits for the job, running when the wait began, which ends HOLD_S later and completes (a
    # slurmctld restart with gpu03 gone while it ran would have killed it)
    released: list[float] = []
    release = threading.Timer(HOLD_S, lambda: (released.append(time.monotonic()), ssh(vc, "gpu03", f"touch {RELEASE}")))
    at_wait: list[str] = []

    def say(line: str) -> None:
        if line.startswith("node gpu03: remove: waiting for its jobs") and not at_wait:
            at_wait.append(ssh(vc, "ctl", f"squeue -h -j {job} -o %T").stdout.strip())
            release.start()
    try:
        result = converge(without, "apply", command="test-remove-node", say=say)
        ended = time.monotonic()
    finally:
        release.cancel()
    assert result.ok, json.dumps(result.to_json(), indent=1)[:4000]
    assert at_wait == ["RUNNING"] and released and ended > released[0], (at_wait, released)
    assert _accounted(vc, job) == "COMPLETED"
    assert [(o.name, o.status) for o in result.nodes["gpu03"].ops] == [
        ("remove node | drain", "changed"), ("remove node | wait for jobs", "changed"),
        ("remove node | out of Slurm", "changed"), ("remove node | stop services", "changed")]
    p = ssh(vc, "ctl", "scontrol show node gpu03", check=False)
    assert p.returncode == 1 and "Node gpu03 not found" in p.stdout + p.stderr
    assert ssh(vc, "gpu03", "systemctl is-active slurmd munge", check=False).stdout.split() == ["inactive"] * 2
    assert ssh(vc, "gpu03", "systemctl is-enabled slurmd", check=False).stdout.strip() == "disabled"
    assert ssh(vc, "gpu03", KEPT).stdout.strip() == "kept"
    # the other compute nodes: 0 changes, slurmd not restarted (a node-set change restarts slurmctld, then
    # `scontrol reconfigure`, which slurmd takes without a restart by systemd); the controller: slurm.conf + restart
    assert result.nodes["gpu01"].count("changed") == 0 and result.nodes["gpu02"].count("changed") == 0
    assert {n: started(vc, n, "slurmd") for n in ("gpu01", "gpu02")} == starts
    changed_ctl = [o for o in result.nodes["ctl"].ops if o.status == "changed"]
    assert [o.name for o in changed_ctl] == [  # ctl is also the monitoring node: a scrape target less
        "base | /etc/hosts entries from the spec", "slurm controller | slurm.conf, gres.conf, cgroup.conf, plugstack.conf",
        "monitoring | prometheus.yml (scrape config)", "monitoring | Prometheus reloaded (scrape config or rules changed)"]
    assert changed_ctl[1].disruption.startswith("restart slurmctld") and started(vc, "ctl", "slurmctld") != ctld
    assert "gpu03" not in node_record.read(without.state_dir)
    _idle(vc, ["gpu01", "gpu02"])
    # a second apply: nothing left to remove, nothing changed
    again = converge(without, "apply", command="test-remove-again")
    assert again.ok and again.changed == 0 and "gpu03" not in again.nodes


def test_a_node_put_back_comes_back_idle_and_touches_no_other_compute_node(vc):
    starts = {n: started(vc, n, "slurmd") for n in ("gpu01", "gpu02")}
    back = _spec(vc, ALL)
    result = converge(back, "apply", command="test-readd-node")
    assert result.ok, json.dumps(result.to_json(), indent=1)[:4000]
    assert result.nodes["gpu03"].count("changed") > 0
    assert result.nodes["gpu01"].count("changed") == 0 and result.nodes["gpu02"].count("changed") == 0
    assert {n: started(vc, n, "slurmd") for n in ("gpu01", "gpu02")} == starts
    _idle(vc, ["gpu01", "gpu02", "gpu03"])
    assert ssh(vc, "ctl", "srun -N1 -w gpu03 hostname").stdout.strip() == "gpu03"
    assert "gpu03" in node_record.read(back.state_dir)


def test_force_cancels_the_running_job_instead_of_waiting(vc):
    job = _job_on_gpu03(vc)
    without = _spec(vc, WITHOUT)
    start = time.monotonic()
    result = converge(without, "apply", command="test-remove-force", force=True)
    took = time.monotonic() - start
    assert result.ok, json.dumps(result.to_json(), indent=1)[:4000]
    assert [o.name for o in result.nodes["gpu03"].ops][:3] == [
        "remove node | drain", "remove node | cancel jobs", "remove node | wait for jobs"]
    assert _accounted(vc, job).startswith("CANCELLED") and took < DRAIN_TIMEOUT_S  # "CANCELLED by 0"
    p = ssh(vc, "ctl", "scontrol show node gpu03", check=False)
    assert p.returncode == 1 and "not found" in p.stdout + p.stderr
