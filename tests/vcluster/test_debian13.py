"""Debian 13 nodes with Slurm 24.11 from Debian's own packages (spec `nodes[].os: debian-13`).

One cluster of its own (ctl + one GPU node + login, alice): the trixie base image and the trixie
repository are built (cached) beside bookworm's, apply converges, Slurm is 24.11, alice's job from the
login node gets one GPU and cannot open the others' device files (task/cgroup ConstrainDevices under
cgroup/v1), validate is OK and a second apply changes nothing.
"""

from __future__ import annotations

import ipaddress
import shlex
import time

import pytest

from corral.spec.loader import load
from corral.workflows.converge import converge
from tests.vcluster.conftest import failures, make_spec, ssh, vcluster_unavailable

pytestmark = pytest.mark.vcluster

SUBNET = ipaddress.IPv4Network("10.213.91.0/24")  # its own: other modules' clusters may be up
BRIDGE = "corraltest13"
PORT = 18091

# each device file opened by the job: EPERM is the devices cgroup refusing it (another job's GPU); an
# allowed one gets past the cgroup to the (absent) driver: ENXIO on an emulated GPU, or it opens
PROBE = ("import errno, glob, os\n"
         "for d in sorted(glob.glob('/dev/nvidia[0-9]*')):\n"
         "    try:\n"
         "        os.close(os.open(d, os.O_RDONLY)); print(d, 'open')\n"
         "    except OSError as e:\n"
         "        print(d, errno.errorcode[e.errno])\n"
         "print('CUDA_VISIBLE_DEVICES', os.environ.get('CUDA_VISIBLE_DEVICES'))\n")


@pytest.fixture(scope="module")
def trixie(tmp_path_factory):
    reason = vcluster_unavailable()
    if reason:
        pytest.skip(reason)
    from corral.virtual.cluster import VirtualCluster
    path = make_spec(tmp_path_factory.mktemp("deb13"), name="deb13", compute=1, usable=True, subnet=SUBNET,
                     bridge=BRIDGE, port=PORT, os_name="debian-13")
    vc = VirtualCluster(load(path))
    try:
        t0 = time.monotonic()
        vc.up()
        print(f"debian-13 virtual cluster up (image and repository built or cached) in {time.monotonic() - t0:.0f} s")
        yield vc
    finally:
        vc.down()


@pytest.fixture(scope="module")
def applied(trixie):
    result = converge(trixie.cluster, "apply", command="test-debian13-apply")
    assert result.ok, failures(result)
    return trixie


def test_nodes_run_debian_13(trixie):
    for node in ("ctl", "gpu01", "login1"):
        assert ssh(trixie, node, ". /etc/os-release; echo $VERSION_CODENAME").stdout.strip() == "trixie"


def test_apply_gives_slurm_24_11(applied):
    for node in ("ctl", "login1"):
        assert ssh(applied, node, "sinfo --version").stdout.strip().startswith("slurm-wlm 24.11."), node
    assert ssh(applied, "gpu01", "slurmd -V").stdout.strip().startswith("slurm-wlm 24.11.")
    conf = ssh(applied, "ctl", "cat /etc/slurm/cgroup.conf").stdout
    assert "CgroupPlugin=cgroup/v1" in conf and "ConstrainDevices=yes" in conf and "CgroupAutomount" not in conf


def _alice_job(vc) -> dict[str, str]:
    script = f"srun --gres=gpu:1 python3 -c {shlex.quote(PROBE)}"
    out = ssh(vc, "login1", f"su - alice -c {shlex.quote(script)} </dev/null").stdout
    return dict(line.split(" ", 1) for line in out.splitlines() if " " in line)


def test_alice_job_gets_one_gpu_and_cannot_open_the_others(applied):
    seen = _alice_job(applied)
    devices = {d: r for d, r in seen.items() if d.startswith("/dev/nvidia")}
    assert len(devices) == 4, seen  # the node has 4 (emulated) GPUs: all four device files are there
    allowed = [d for d, r in devices.items() if r != "EPERM"]
    assert len(allowed) == 1 and devices[allowed[0]] in ("ENXIO", "open"), seen
    assert seen["CUDA_VISIBLE_DEVICES"] == "0", seen


def test_validate_ok_and_second_apply_changes_nothing(applied):
    from corral.checks.validate import validate
    report = validate(applied.cluster)
    assert report.ok, [c.to_json() for c in report.checks if not c.ok]
    again = converge(applied.cluster, "apply", command="test-debian13-again")
    assert again.ok and again.changed == 0, [
        (n, o.name) for n, r in again.nodes.items() for o in r.ops if o.status == "changed"]

