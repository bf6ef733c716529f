"""Power saving on a real virtual cluster, through the emulated Redfish BMC (virtual/bmc.py: hardware
EMULATION on the bridge's host address; everything else is real: slurmctld runs corral's programs as
the slurm user on ctl, they call the BMC over HTTP with the credentials corral installed there).

- an idle node is powered down by Slurm after SuspendTime: off in `virtual status`, idle~ in sinfo;
- a job for it powers it on (ResumeProgram -> Redfish Reset On -> the node boots), runs, the node is
  idle again;
- a node whose BMC refuses (the emulator's bmc-refuse test hook) does not come back within
  ResumeTimeout: ResumeFailProgram drains it with `corral: power: resume failed`.

The cluster is deployed with power off first, then power is switched on by a second apply of the
controller (slurmctld restarted: a reconfigure does not enable power saving), so no node is powered
off while the first apply still works on it. About 3 minutes after the cluster is up.
"""

from __future__ import annotations

import time

import pytest

from corral.spec.loader import load, load_text
from corral.workflows.converge import converge
from tests.vcluster.conftest import TEST_BRIDGE, TEST_PORT, TEST_SUBNET, ssh, vcluster_unavailable, failures

pytestmark = pytest.mark.vcluster
NET = str(TEST_SUBNET.network_address)[:-2]  # "10.213.77"
BMC_PORT = 18623
# the spec's shortest SuspendTime is 10 s. ResumeTimeout: a virtual node boots and its slurmd registers within
# 3-5 s of the BMC's Reset On (POST_S included); the refused node's wait for it is this test's longest
SUSPEND_S, RESUME_TIMEOUT_S = 12, 15
# slurmctld starts a job that waited for its node's power-up at a periodic check: seen up to 23 s after the node
# registered (Slurm 22.05: at the 30 s ticks from slurmctld's start), whatever ResumeTimeout is
JOB_CHECK_S = 30
SPEC = f"""\
name: powertest
ssh: {{user: root, key: .corral/ssh/id_ed25519}}
nodes:
  - {{names: ctl, addresses: [{NET}.10], roles: [controller]}}
  - {{names: "gpu[01-02]", addresses: "{NET}.[11-12]", roles: [compute]}}
slurm:
  partitions: [{{name: all, nodes: ALL, default: true}}]
power:
  enabled: true
  suspend_after: {SUSPEND_S}s
  suspend_timeout: 10s
  resume_timeout: {RESUME_TIMEOUT_S}s
  bmc:
    scheme: http
    timeout_s: 5
    credentials_file: .corral/secrets/bmc-credentials
    nodes:
      - {{names: "gpu[01-02]", address: "{NET}.1:{BMC_PORT}"}}
virtual: {{subnet: {TEST_SUBNET}, bridge: {TEST_BRIDGE}, repo_port: {TEST_PORT}}}
"""


@pytest.fixture(scope="module")
def powered(tmp_path_factory):
    reason = vcluster_unavailable()
    if reason:
        pytest.skip(reason)
    from corral.virtual.cluster import VirtualCluster
    d = tmp_path_factory.mktemp("power")
    (d / "cluster.yaml").write_text(SPEC)
    vc = VirtualCluster(load(d / "cluster.yaml"))
    try:
        vc.up()  # power enabled: the emulated BMC is started, its credentials made (0600)
        cred = d / ".corral/secrets/bmc-credentials"
        assert cred.stat().st_mode & 0o777 == 0o600
        off = load_text(SPEC.replace("enabled: true", "enabled: false"), str(d / "cluster.yaml"))
        result = converge(off, "apply")
        assert result.ok, failures(result)
        result = converge(vc.cluster, "apply", limit=["ctl"])  # power on: the programs, slurm.conf, a restart
        assert result.ok, failures(result)
        yield vc
    finally:
        vc.down()


def state(vc, node: str) -> tuple[str, str, str]:
    """(sinfo's compact state e.g. idle~, scontrol's State=..., Reason=...)."""
    compact = ssh(vc, "ctl", f"sinfo -h -N -n {node} -o %T").stdout.strip()
    line = ssh(vc, "ctl", f"scontrol show node -o {node}").stdout
    full = line.split("State=")[1].split()[0]
    reason = line.split("Reason=")[1].strip() if "Reason=" in line else ""
    return compact, full, reason


def running(vc, node: str) -> bool:
    return next(s.running for s in vc.status() if s.name == node)


def until(what: str, test, timeout: float, every: float = 0.5):
    deadline = time.monotonic() + timeout
    while True:
        got = test()
        if got:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout:.0f} s: {what}")
        time.sleep(every)


def diagnosed(vc, node: str, job: str, wait):
    """wait(); on a timeout, what Slurm and the node said (for the failure message)."""
    try:
        return wait()
    except AssertionError as exc:
        said = [ssh(vc, "ctl", c, check=False).stdout + ssh(vc, "ctl", c, check=False).stderr for c in (
            f"scontrol show node -o {node}", f"scontrol show job -o {job}", "tail -n 30 /var/log/slurm/slurmctld.log",
            "tail -n 20 /var/log/slurm/corral-power.log")]
        said.append(ssh(vc, node, "systemctl status slurmd --no-pager -n 20", check=False).stdout)
        raise AssertionError(f"{exc}\n" + "\n---\n".join(said)) from None


def test_programs_installed_for_the_slurm_user(powered):
    out = ssh(powered, "ctl", "stat -c '%a %U' /etc/corral/bmc-credentials /usr/local/sbin/corral-power-resume; "
                              "scontrol show config | grep -E '^(SuspendProgram|ResumeFailProgram|SuspendTime) '").stdout
    assert "600 slurm" in out and "755 root" in out and "corral-power-suspend" in out and "corral-power-resume-fail" in out


def test_idle_nodes_are_powered_down(powered):
    for node in ("gpu01", "gpu02"):
        until(f"{node} idle~ in sinfo and off", lambda: state(powered, node)[0] == "idle~" and not running(powered, node),
              SUSPEND_S + 10 + 10 + 40)
        assert "POWERED_DOWN" in state(powered, node)[1]
    log = ssh(powered, "ctl", "cat /var/log/slurm/corral-power.log").stdout
    assert "power off gpu01: GracefulShutdown (was On)" in log
    secret = (powered.cluster.base_dir / ".corral/secrets/bmc-credentials").read_text().split(":", 1)[1].strip()
    assert secret not in log


def test_a_job_powers_its_node_on(powered):
    until("gpu01 powered down", lambda: state(powered, "gpu01")[0] == "idle~", SUSPEND_S + 60)
    job = ssh(powered, "ctl", "sbatch --parsable -w gpu01 -t 2 -o /dev/null --wrap 'hostname'").stdout.strip()
    until("gpu01 on (the BMC booted it)", lambda: running(powered, "gpu01"), 30)
    done = diagnosed(powered, "gpu01", job, lambda: until(f"job {job} ended", lambda: next((w for w in ssh(powered, "ctl", f"scontrol show job -o {job}")
                                                   .stdout.split() if w.startswith("JobState=") and w not in
                                                   ("JobState=PENDING", "JobState=CONFIGURING", "JobState=RUNNING",
                                                    "JobState=COMPLETING")), None), RESUME_TIMEOUT_S + JOB_CHECK_S + 15))
    assert done == "JobState=COMPLETED", done
    until("gpu01 idle again, powered up", lambda: state(powered, "gpu01")[0] == "idle", 15)
    assert "POWER" not in state(powered, "gpu01")[1] and running(powered, "gpu01")
    assert "power on gpu01: On (was Off)" in ssh(powered, "ctl", "cat /var/log/slurm/corral-power.log").stdout


def test_a_node_that_fails_to_resume_is_drained(powered):
    refuse = powered.state_dir / "bmc-refuse"
    until("gpu02 powered down", lambda: state(powered, "gpu02")[0] == "idle~", SUSPEND_S + 60)
    refuse.write_text("gpu02\n")
    job = ssh(powered, "ctl", "sbatch --parsable -w gpu02 -t 2 -o /dev/null --wrap 'hostname'").stdout.strip()
    try:
        until("gpu02 drained after ResumeTimeout", lambda: "DRAIN" in state(powered, "gpu02")[1],
              RESUME_TIMEOUT_S + 40)
        _, full, reason = state(powered, "gpu02")
        assert reason.startswith("corral: power: resume failed"), (full, reason)
        assert not running(powered, "gpu02")
        log = ssh(powered, "ctl", "cat /var/log/slurm/corral-power.log").stdout
        assert "power on gpu02: failed:" in log and "HTTP 503" in log and "resume failed gpu02: drained" in log
    finally:
        refuse.unlink(missing_ok=True)
        ssh(powered, "ctl", f"scancel {job}", check=False)
