"""Fixtures for end-to-end tests on a real virtual cluster (root, systemd-nspawn)."""

from __future__ import annotations

import ipaddress
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from corral.spec.loader import load
from corral.virtual.defaults import VIRTUAL_OS, default_spec

# a subnet, bridge and port of the tests' own, so a user's running virtual cluster is never touched
TEST_SUBNET = ipaddress.IPv4Network("10.213.77.0/24")
TEST_BRIDGE = "corraltest0"
TEST_PORT = 18080
# the shared cluster (test_checks, test_monitoring, test_slurm use it one after the other) has its own,
# so it can stay up while other modules boot theirs
SHARED_SUBNET = ipaddress.IPv4Network("10.213.78.0/24")
SHARED_BRIDGE = "corraltest1"
SHARED_PORT = 18082
# monitoring's test profile: scrape and evaluate every 2 s, every alert's `for:` 4 s
MONITORING_PROFILE = "monitoring: {scrape_interval_s: 2, alerts: {for_s: 4}}\n"
# the usable cluster (test_security_identity, test_security_root, test_users, one after the other): its own
USABLE_SUBNET = ipaddress.IPv4Network("10.213.84.0/24")
USABLE_BRIDGE = "corraltest4"
USABLE_PORT = 18084
USABLE_BMC_PORT = 18624
# power on with the emulated BMC, so the BMC credentials exist on ctl (test_security_root); no node is idle
# for an hour here, so none is suspended
USABLE_POWER = f"""power:
  enabled: true
  suspend_after: 3600s
  bmc:
    scheme: http
    timeout_s: 5
    credentials_file: .corral/secrets/bmc-credentials
    nodes:
      - {{names: "gpu[01-02]", address: "{USABLE_SUBNET.network_address + 1}:{USABLE_BMC_PORT}"}}
"""


def vcluster_unavailable() -> str | None:
    if os.geteuid() != 0:
        return "needs root"
    for tool in ("systemd-nspawn", "debootstrap", "dpkg-scanpackages"):
        if shutil.which(tool) is None:
            return f"needs {tool} (run scripts/bootstrap.sh test)"
    return None


def make_spec(directory: Path, *, name: str = "ctest", compute: int = 2, gpus: int = 4,
              usable: bool = False, subnet: ipaddress.IPv4Network = TEST_SUBNET, bridge: str = TEST_BRIDGE,
              port: int = TEST_PORT, os_name: str | None = VIRTUAL_OS) -> Path:
    """The default virtual spec on the tests' subnet; `usable`: with the login node, shared /home and
    alice (her key generated as `corral up` does); without, the 3 nodes most modules need."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "cluster.yaml"
    key = None
    if usable:
        from corral.virtual.keys import ensure_key, user_key_file
        key = ensure_key(user_key_file(directory / ".corral", "alice"), f"alice@{name}")
    path.write_text(default_spec(name, compute, gpus, "h100", subnet, bridge, port,
                                 usable=usable, user_key=key, os_name=os_name))
    return path


def started(vc, node: str, unit: str) -> str:
    """When systemd last started `unit` and how often it restarted it: unchanged unless systemd (re)started
    the daemon. Not its PID: from Slurm 24.11 `scontrol reconfigure` re-executes slurmctld and slurmd in
    place (a new PID, the unit active throughout)."""
    return ssh(vc, node, f"systemctl show -p ActiveEnterTimestampMonotonic -p NRestarts {unit}").stdout.strip()


def ssh(vc, node: str, command: str, check: bool = True) -> subprocess.CompletedProcess:
    n = vc.node(node).node
    proc = subprocess.run(vc.ssh_cmd(n.address, command), capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, timeout=60)
    if check and proc.returncode != 0:
        raise AssertionError(f"{node}: {command!r} rc={proc.returncode}: {proc.stderr}")
    return proc


def failures(result) -> str:
    """What failed in a RunResult, for an assertion message: each failed node's error and failed ops with
    their reason and the end of their stderr (the whole result is too long to show the part that matters)."""
    lines = []
    for name, node in result.nodes.items():
        if node.error:
            lines.append(f"{name}: {node.error}")
        lines += [f"{name}: {o.name}: {o.reason}\n{o.stderr_tail[-2000:]}" for o in node.ops if o.status == "failed"]
    return "\n".join(lines) or "nothing failed"


@pytest.fixture(scope="module")
def vcluster(tmp_path_factory):
    """A fresh 3-node virtual cluster (1 controller + 2 compute x 4 emulated H100) for one module."""
    reason = vcluster_unavailable()
    if reason:
        pytest.skip(reason)
    from corral.virtual.cluster import VirtualCluster
    vc = VirtualCluster(load(make_spec(tmp_path_factory.mktemp("vc"))))
    try:
        vc.up()
        yield vc
    finally:
        vc.down()


def settled(vc, command: str) -> None:
    """Converged (apply succeeds) and every compute node idle in Slurm: what a module using the shared
    cluster starts from, whatever the module before it did."""
    import json
    import time
    from corral.workflows.converge import converge
    result = converge(vc.cluster, "apply", command=command)
    assert result.ok, json.dumps(result.to_json(), indent=1)[:4000]
    deadline = time.monotonic() + 90
    while True:
        states = ssh(vc, "ctl", "sinfo -h -N -o '%N %T'").stdout.split()
        if all(s == "idle" for s in states[1::2]) or time.monotonic() > deadline:
            break
        time.sleep(1)
    assert all(s == "idle" for s in states[1::2]), states


# A session's cluster goes down right after the last collected test that uses it, not at the session's end:
# an idle cluster left up costs the modules after it CPU (the shared one scrapes every 2 s).
_LAST_USER: dict[str, str] = {}  # fixture name -> node id of the last collected test using it
_DOWN: dict[str, object] = {}  # a session cluster's fixture name -> its down(), while it is up


def pytest_collection_modifyitems(session, config, items):
    for item in items:
        for name in getattr(item, "fixturenames", ()):
            _LAST_USER[name] = item.nodeid


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item, nextitem):
    for name in [n for n in _DOWN if _LAST_USER.get(n) == item.nodeid]:
        _DOWN.pop(name)()


def _session_cluster(name: str, vc):
    """Up for the session's tests that use it; down after the last of them (or at the session's end)."""
    _DOWN[name] = vc.down
    try:
        vc.up()
        yield vc
    finally:
        if (down := _DOWN.pop(name, None)) is not None:
            down()


@pytest.fixture(scope="session")
def shared_cluster(tmp_path_factory):
    """One default 3-node cluster (ctl + gpu01-02 x 4 emulated H100, monitoring test profile) shared by
    test_checks, test_monitoring and test_slurm, in that order (each puts back what it changes; test_slurm
    goes last: it adds a node and rebuilds the controller). Deployed by the first module's fixture.

    Debian 12 (Slurm 22.05), where new virtual clusters run Debian 13: the release a cluster.yaml without
    `os:` means keeps its full path here, with test_slurm_version's pins from 22.05 (Debian 13's Slurm
    path, its upgrade to 26.05 included, is test_debian13's; its users' path test_users' and test_workbench's)."""
    reason = vcluster_unavailable()
    if reason:
        pytest.skip(reason)
    from corral.virtual.cluster import VirtualCluster
    path = make_spec(tmp_path_factory.mktemp("shared"), name="cshared", subnet=SHARED_SUBNET,
                     bridge=SHARED_BRIDGE, port=SHARED_PORT, os_name="debian-12")
    path.write_text(path.read_text() + MONITORING_PROFILE)
    yield from _session_cluster("shared_cluster", VirtualCluster(load(path)))


@pytest.fixture(scope="session")
def usable_cluster(tmp_path_factory):
    """The usable cluster (ctl also the NFS node, gpu01-02, login1, alice with her key; power on, never
    suspending; the Slurm REST API on ctl) shared by test_security_identity, test_security_root and test_users, in that order. Each
    module's fixture applies the spec first (`settled`) and puts its spec file back. What a spec without
    it does not undo stays, as on a real cluster: test_security_identity's SSSD and directory, which the
    later modules then run beside (test_users' SSH test is what found pam_localuser skipping pam_slurm_adopt)."""
    reason = vcluster_unavailable()
    if reason:
        pytest.skip(reason)
    from corral.virtual.cluster import VirtualCluster
    path = make_spec(tmp_path_factory.mktemp("usable"), name="usable", usable=True, subnet=USABLE_SUBNET,
                     bridge=USABLE_BRIDGE, port=USABLE_PORT)
    # the Slurm REST API on ctl (login nodes its clients, the default): test_users' REST test
    path.write_text(path.read_text().replace("\nslurm:\n", "\nslurm:\n  rest: {}\n") + USABLE_POWER)
    yield from _session_cluster("usable_cluster", VirtualCluster(load(path)))
