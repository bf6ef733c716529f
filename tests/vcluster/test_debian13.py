"""Debian 13 nodes with Slurm 24.11 from Debian's own packages (spec `nodes[].os: debian-13`), then the
real upgrade to Slurm 26.05 (Debian unstable's binaries, virtual/slurm_more.py).

One cluster of its own (ctl: controller + accounting; ctl2: the backup controller, slurmctld's state on
the emulated NAS; gpu01, gpu02; login1 with alice): the trixie base image and repository are built
(cached) beside bookworm's, apply converges at slurm.version 24.11, alice's job from the login node gets
one GPU and cannot open the others' device files (task/cgroup ConstrainDevices under cgroup/v1),
validate is OK and a second apply changes nothing. Then, with a finished, a held and a running job of
alice's, slurm.version 26.05: plan shows the order and the batches; the first apply meets a broken
slurmd package (a stand-in whose preinst fails) at the canary: slurmdbd (backup first) and both slurmctld
are upgraded, the canary is left drained with the failure as its reason, the other compute node is not
touched (its slurmd at 24.11, alice's job running on). With the good package back in the repository the
next apply upgrades the canary and the rest; every job is still there, accounting lists the old ones,
validate is OK and a second apply changes nothing.
"""

from __future__ import annotations

import ipaddress
import re
import shlex
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from ruamel.yaml import YAML

from corral.spec.loader import load
from corral.workflows.converge import converge
from tests.vcluster.conftest import failures, make_spec, ssh, vcluster_unavailable

pytestmark = pytest.mark.vcluster

SUBNET = ipaddress.IPv4Network("10.213.91.0/24")  # its own: other modules' clusters may be up
BRIDGE = "corraltest13"
PORT = 18091
FROM, TO = "24.11", "26.05"

# each device file opened by the job: EPERM is the devices cgroup refusing it (another job's GPU); an
# allowed one gets past the cgroup to the (absent) driver: ENXIO on an emulated GPU, or it opens
PROBE = ("import errno, glob, os\n"
         "for d in sorted(glob.glob('/dev/nvidia[0-9]*')):\n"
         "    try:\n"
         "        os.close(os.open(d, os.O_RDONLY)); print(d, 'open')\n"
         "    except OSError as e:\n"
         "        print(d, errno.errorcode[e.errno])\n"
         "print('CUDA_VISIBLE_DEVICES', os.environ.get('CUDA_VISIBLE_DEVICES'))\n")


def with_ha(path, version: str) -> None:
    """The default spec plus a backup controller (ctl2) with slurmctld's state on the emulated NAS, Slurm
    pinned at `version`, and a rollout policy of a canary then batches of one."""
    yaml = YAML()
    data = yaml.load(path.read_text())
    net = str(SUBNET.network_address)[:-2]
    data["nodes"].insert(1, {"names": "ctl2", "addresses": [f"{net}.9"], "roles": ["controller"], "os": "debian-13"})
    data["slurm"].update(version=version, state_save_location="/srv/slurmctld-state", slurmctld_timeout_s=10)
    data["storage"]["mounts"].append({"path": "/srv/slurmctld-state", "server": "nas1",
                                      "export": "/export/slurmstate", "roles": ["controller"]})
    data["rollout"] = {"canary": 1, "batch": 1, "drain_timeout": 600}
    # the NVIDIA driver from Debian's own archive (non-free, contrib), named by its branch alone
    data["nvidia"] = {**(data.get("nvidia") or {}), "driver": {"source": "distribution", "branch": "550"}}
    # an NVLink domain per node (topology/block: Slurm 23.11 and later, refused on Debian 12's 22.05)
    data["topology"] = {"blocks": [{"name": "nvl1", "nodes": "gpu01"}, {"name": "nvl2", "nodes": "gpu02"}]}
    with path.open("w") as f:
        yaml.dump(data, f)


@pytest.fixture(scope="module")
def trixie(tmp_path_factory):
    reason = vcluster_unavailable()
    if reason:
        pytest.skip(reason)
    from corral.virtual.cluster import VirtualCluster
    path = make_spec(tmp_path_factory.mktemp("deb13"), name="deb13", compute=2, usable=True, subnet=SUBNET,
                     bridge=BRIDGE, port=PORT, os_name="debian-13")
    with_ha(path, FROM)
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
    trixie.first_apply = result
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
    assert_blocks(applied)


def assert_blocks(vc) -> None:
    """topology/block live: slurmctld knows both NVLink domains and a job runs inside one."""
    shown = ssh(vc, "ctl", "scontrol show topology").stdout
    lines = {w.split("=", 1)[1]: line for line in shown.splitlines() for w in line.split() if w.startswith("BlockName=")}
    assert set(lines) == {"nvl1", "nvl2"} and "gpu01" in lines["nvl1"] and "gpu02" in lines["nvl2"], shown
    assert "topology/block" in ssh(vc, "ctl", "scontrol show config | grep -i '^TopologyPlugin'").stdout


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


DRIVER = ("nvidia-open-kernel-dkms", "nvidia-smi", "libcuda1", "libnvidia-ml1")  # H100: NVIDIA's open modules
DEB = "550.163.01-2"


def test_distribution_driver_from_non_free(applied):
    """nvidia.driver {source: distribution, branch: "550"}: Debian's own packages, through corral's repository and
    the rollout (drain, install, reboot, verify, resume) a real node takes; only the device layer is emulated."""
    said = applied.first_apply.warnings[0]
    assert said == "nvidia.driver.branch 550: 550.163.01 (the newest of the branch in the nodes' repositories); " \
                   "this run pins it", applied.first_apply.warnings
    steps = [o.reason or "" for r in applied.first_apply.nodes.values() for o in r.ops
             if o.name.startswith("driver rollout")]
    for node in ("gpu01", "gpu02"):
        shown = ssh(applied, node, "dpkg -l " + " ".join(DRIVER + ("nvidia-persistenced",))).stdout
        print(f"{node}:\n{shown}")
        rows = {f[1].split(":")[0]: (f[0], f[2])  # libcuda1:amd64 -> libcuda1
                for f in (line.split() for line in shown.splitlines()) if f and f[0] == "ii"}
        assert {p: rows.get(p) for p in DRIVER} == {p: ("ii", DEB) for p in DRIVER}, shown
        assert rows["nvidia-persistenced"] == ("ii", "550.163.01-1"), shown  # its own source package
        pin = ssh(applied, node, "cat /etc/apt/preferences.d/corral-nvidia-driver").stdout
        assert pin.splitlines()[1:] == ["Package: nvidia-open-kernel-dkms libcuda1 nvidia-* libnvidia-* cuda-drivers*",
                                        "Pin: version 550.163.01-*", "Pin-Priority: 1001"], pin
        policy = ssh(applied, node, "apt-cache policy libcuda1").stdout
        assert re.search(r"\*\*\* 550\.163\.01-2 1001", policy), policy  # held by the pin
        assert "blacklist nouveau" in ssh(applied, node, "cat /etc/modprobe.d/corral-blacklist-nouveau.conf").stdout
        # Debian's unit, enabled and running (its process EMULATED: no kernel driver whose state it could keep)
        unit = ssh(applied, node, "systemctl is-enabled nvidia-persistenced; systemctl is-active nvidia-persistenced; "
                                  "systemctl show -p FragmentPath -p User --value nvidia-persistenced").stdout.split()
        assert unit == ["enabled", "active", "nvpd", "/usr/lib/systemd/system/nvidia-persistenced.service"], unit
        # the device layer: the stand-in nvidia-smi stays in front of the real one's alternative, and reports the
        # module a real boot would have loaded (the DKMS source's version)
        assert ssh(applied, node, "nvidia-smi --query-gpu=driver_version --format=csv,noheader").stdout.split() == \
            ["550.163.01"] * 4
    dkms = [m for m in steps if "DKMS: the module was not built, no headers for the running kernel" in m]
    assert dkms, steps
    print(said, *dkms, sep="\n")


def test_validate_ok_and_second_apply_changes_nothing(applied):
    from corral.checks.validate import validate
    report = validate(applied.cluster)
    assert report.ok, [c.to_json() for c in report.checks if not c.ok]
    again = converge(applied.cluster, "apply", command="test-debian13-again")
    assert again.ok and again.changed == 0, [
        (n, o.name) for n, r in again.nodes.items() for o in r.ops if o.status == "changed"]



def _variant(vc, name: str, **slurm):
    """The cluster's spec with slurm: keys changed, written beside it as cluster-NAME.yaml, loaded."""
    yaml = YAML()
    data = yaml.load(vc.cluster.path.read_text())
    data["slurm"].update(slurm)
    path = vc.cluster.path.with_name(f"cluster-{name}.yaml")
    with path.open("w") as f:
        yaml.dump(data, f)
    return load(path)


def test_an_upgrade_across_25_11_with_clean_jobs_is_refused_before_anything_changes(applied):
    """job_container/tmpfs (24.11) became namespace/tmpfs (25.11): one slurm.conf cannot serve daemons of
    both releases, so the plan refuses on every Slurm node and names the way (clean jobs off for the upgrade)."""
    cluster = _variant(applied, "clean-upgrade", version=TO, clean_jobs=True)
    plan = converge(cluster, "plan", command="test-debian13-clean-upgrade-refused")
    said = "JobContainerType=job_container/tmpfs -> NamespaceType=namespace/tmpfs"
    erred = {n: r.error for n, r in plan.nodes.items() if r.error}
    assert set(erred) >= {"ctl", "ctl2", "gpu01", "gpu02", "login1"}, erred
    assert all(said in e and "slurm.version 26.05" in e for e in erred.values()), erred
    assert not [r for r in plan.rollouts if r["what"] == "slurm upgrade"]


# -- the upgrade: 24.11 -> 26.05, for real ------------------------------------------------------------------

def alice(vc, command: str) -> str:
    return ssh(vc, "login1", f"su - alice -c {shlex.quote(command)} </dev/null").stdout.strip()


def wait_for(what: str, check, seconds: float = 60):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(1)
    raise AssertionError(f"{what}: not within {seconds:.0f} s")


# alice's running job runs until she creates this file (her home is shared): the upgrade finds it running
# through the failed canary, and its wait for jobs on gpu02 finds it running until then
RELEASE = "~/.corral-test-upgrade-release"
STANDIN = "corral test: a broken slurmd package stand-in (its preinst fails)"


def break_slurmd(pool: Path, keep: Path) -> None:
    """slurmd's package in the 26.05 repository swapped for a stand-in of the same version whose preinst
    fails (the good one kept in `keep`); the repository indexed again."""
    from corral.bundle.resolve import index
    (deb,) = pool.glob("slurmd_*.deb")
    shutil.copy2(deb, keep / deb.name)
    root = keep / "root"
    subprocess.run(["dpkg-deb", "-R", str(deb), str(root)], check=True, capture_output=True, timeout=120)
    preinst = root / "DEBIAN" / "preinst"
    preinst.write_text(f"#!/bin/sh\necho {shlex.quote(STANDIN)} >&2\nexit 1\n")
    preinst.chmod(0o755)
    subprocess.run(["dpkg-deb", "--root-owner-group", "-b", str(root), str(deb)], check=True, capture_output=True,
                   timeout=300)
    index(pool.parent)


def restore_slurmd(pool: Path, keep: Path) -> None:
    from corral.bundle.resolve import index
    for deb in keep.glob("*.deb"):
        shutil.copy2(deb, pool / deb.name)
    index(pool.parent)


def _timed(cluster, command: str, lines: list, hook=None):
    """apply with the real backup; each say line kept with its time, and given to `hook` as it comes."""
    from corral.backup.take import take
    t0 = time.monotonic()

    def say(line: str) -> None:
        lines.append((time.monotonic() - t0, line))
        if hook:
            hook(line)
    result = converge(cluster, "apply", command=command, backup=take, say=say)
    print(f"{command}: {time.monotonic() - t0:.1f} s")
    for at, line in lines:
        print(f"  {at:6.1f} s  {line}")
    return result


@pytest.fixture(scope="module")
def upgraded(applied, tmp_path_factory):
    """alice's finished, held and running jobs, then slurm.version 26.05 planned and applied (the real
    backup first, as `corral apply` passes it): first with a broken slurmd package, then with the good one
    back. The say lines are kept with their time, for the phases."""
    from corral.virtual import repo, slurm_more
    vc = applied
    jobs = {"finished": alice(vc, "sbatch --parsable --wait --wrap hostname"),
            "held": alice(vc, "sbatch --parsable --hold --wrap hostname"),
            "running": alice(vc, f"rm -f {RELEASE}; sbatch --parsable --nodelist=gpu02 -t 15 --wrap "
                                 f"'until [ -e {RELEASE} ]; do sleep 1; done'")}
    wait_for("alice's job running", lambda: ssh(vc, "ctl", f"squeue -h -j {jobs['running']} -o %T").stdout.strip()
             == "RUNNING")
    yaml = YAML()
    data = yaml.load(vc.cluster.path.read_text())
    data["slurm"]["version"] = TO
    path = vc.cluster.path.with_name(f"cluster-{TO}.yaml")
    with path.open("w") as f:
        yaml.dump(data, f)
    cluster = load(path)
    t0 = time.monotonic()
    vc_new = type(vc)(cluster)
    vc_new.up()  # what a user runs after changing slurm.version: the repository gets corral's 26.05 build
    prepared = time.monotonic() - t0
    print(f"repository with {TO}: {prepared:.1f} s")
    plan = converge(cluster, "plan", command="test-debian13-upgrade-plan")
    pool = repo.repo_dir("debian-13") / slurm_more.subdir(TO) / "pool"
    keep = tmp_path_factory.mktemp("good-slurmd")
    broken_lines: list[tuple[float, str]] = []
    break_slurmd(pool, keep)
    try:
        broken = _timed(cluster, "test-debian13-upgrade-broken", broken_lines)
        after = {"gpu01": ssh(vc, "ctl", "sinfo -h -n gpu01 -o '%T|%E'").stdout.strip(),
                 "gpu02": ssh(vc, "ctl", "sinfo -h -n gpu02 -o '%T|%E'").stdout.strip(),
                 "gpu02 slurmd": ssh(vc, "gpu02", "slurmd -V").stdout.strip(),
                 "gpu01 slurmd": ssh(vc, "gpu01", "slurmd -V").stdout.strip(),
                 "gpu01 audit": ssh(vc, "gpu01", "dpkg --audit; apt-get check -qq 2>&1", check=False
                                    ).stdout.strip(),
                 "ctl slurmctld": ssh(vc, "ctl", "slurmctld -V").stdout.strip(),
                 "running": ssh(vc, "ctl", f"squeue -h -j {jobs['running']} -o %T").stdout.strip()}
    finally:
        restore_slurmd(pool, keep)
    lines: list[tuple[float, str]] = []
    at_drain: list[str] = []

    def release(line: str) -> None:
        """gpu02 drained, its wait for jobs next: alice's job, still running, is let finish."""
        if line.startswith("node gpu02: slurm upgrade: drain") and not at_drain:
            at_drain.append(ssh(vc, "ctl", f"squeue -h -j {jobs['running']} -o %T").stdout.strip())
            alice(vc, f"touch {RELEASE}")
    result = _timed(cluster, "test-debian13-upgrade", lines, release)
    return {"vc": vc, "cluster": cluster, "plan": plan, "broken": broken, "broken_lines": broken_lines,
            "after_broken": after, "result": result, "lines": lines, "jobs": jobs, "at_drain": at_drain}


def test_upgrade_planned_in_slurms_order(upgraded):
    entry = [r for r in upgraded["plan"].rollouts if r["what"] == "slurm upgrade"]
    assert len(entry) == 1, upgraded["plan"].rollouts
    summary = entry[0]["summary"]
    assert summary.startswith(f"{FROM}.") and (f" -> {TO}: backup, slurmdbd on ctl, slurmctld on ctl, "
                                               "slurmctld on ctl2, client tools on login1, then slurmd: ") in summary, summary
    assert "gpu01" in summary and "gpu02" in summary, summary


def test_a_broken_slurmd_package_stops_the_upgrade_at_the_canary(upgraded):
    broken, after = upgraded["broken"], upgraded["after_broken"]
    assert not broken.ok and broken.nodes["gpu01"].error, failures(broken)
    error = broken.nodes["gpu01"].error
    assert "slurm upgrade: install failed" in error and "its Slurm packages put back as they were" in error, error
    # nothing half-upgraded is left: its old slurmd back and running, dpkg and apt consistent
    assert after["gpu01 slurmd"].split()[-1].startswith(f"{FROM}.") and after["gpu01 audit"] == "", after
    assert [n for n, r in broken.nodes.items() if not r.ok] == ["gpu01"], failures(broken)
    said = [line for _, line in upgraded["broken_lines"]]
    marks = [next(i for i, line in enumerate(said) if m in line) for m in (
        "slurm upgrade: backup", "node ctl: slurm upgrade: slurmdbd", "node ctl: slurm upgrade: slurmctld",
        "node ctl2: slurm upgrade: slurmctld", "node login1: slurm upgrade: client tools",
        "node gpu01: slurm upgrade: install FAILED")]
    assert marks == sorted(marks), said
    assert not any("node gpu02: slurm upgrade" in line for line in said), said  # the rest untouched
    state, reason = after["gpu01"].split("|", 1)
    assert state.startswith("drain") and reason.startswith("corral: slurm upgrade install failed"), after
    assert not after["gpu02"].startswith("drain") and after["gpu02 slurmd"].split()[-1].startswith(f"{FROM}."), after
    assert after["running"] == "RUNNING" and after["ctl slurmctld"].split()[-1].startswith(f"{TO}."), after
    assert any(f"slurmdbd and slurmctld are at {TO}" in w for w in broken.warnings), broken.warnings


def test_upgrade_applied_in_order_and_every_daemon_at_26_05(upgraded):
    result, vc = upgraded["result"], upgraded["vc"]
    assert result.ok, failures(result)
    said = [line for _, line in upgraded["lines"]]
    marks = [next(i for i, line in enumerate(said) if m in line) for m in (
        "slurm upgrade: backup", "node gpu01: slurm upgrade: install", "node gpu02: slurm upgrade: drain",
        "node gpu02: slurm upgrade: wait for jobs", "node gpu02: slurm upgrade: install")]
    assert marks == sorted(marks), said
    assert upgraded["at_drain"] == ["RUNNING"], upgraded["at_drain"]  # drained with her job running: it waited
    assert not any("slurm upgrade: slurmdbd" in line or "slurm upgrade: slurmctld" in line for line in said), said
    assert ssh(vc, "ctl", "sinfo -h -n gpu01 -o %T").stdout.strip() in ("idle", "mixed", "allocated")
    for node, command in (("ctl", "slurmdbd -V"), ("ctl", "slurmctld -V"), ("ctl2", "slurmctld -V"),
                          ("gpu01", "slurmd -V"), ("gpu02", "slurmd -V"), ("login1", "sinfo --version")):
        assert ssh(vc, node, command).stdout.split()[-1].startswith(f"{TO}."), (node, command)
    ping = ssh(vc, "ctl", "scontrol ping").stdout
    assert "Slurmctld(primary) at ctl is UP" in ping and "Slurmctld(backup) at ctl2 is UP" in ping, ping


def test_every_job_still_there_and_accounted(upgraded):
    vc, jobs = upgraded["vc"], upgraded["jobs"]
    assert ssh(vc, "ctl", f"squeue -h -j {jobs['held']} -o '%T %r'").stdout.split() == ["PENDING", "JobHeldUser"]
    state = wait_for("the running job's end", lambda: ssh(
        vc, "ctl", f"sacct -n -X -P -j {jobs['running']} -o State").stdout.strip() in ("COMPLETED", "FAILED",
                                                                                      "CANCELLED", "NODE_FAIL")
        and ssh(vc, "ctl", f"sacct -n -X -P -j {jobs['running']} -o State").stdout.strip(), 120)
    assert state == "COMPLETED"
    listed = alice(vc, f"sacct -n -X -P -o JobID,State -j {jobs['finished']},{jobs['running']}")
    assert sorted(listed.splitlines()) == sorted([f"{jobs['finished']}|COMPLETED", f"{jobs['running']}|COMPLETED"])


def test_after_the_upgrade_isolation_validate_and_nothing_to_change(upgraded):
    from corral.checks.validate import validate
    vc, cluster = upgraded["vc"], upgraded["cluster"]
    seen = _alice_job(vc)
    devices = {d: r for d, r in seen.items() if d.startswith("/dev/nvidia")}
    assert len([d for d, r in devices.items() if r != "EPERM"]) == 1, seen
    assert_blocks(vc)  # the NVLink domains at 26.05 too
    report = validate(cluster)
    assert report.ok, [c.to_json() for c in report.checks if not c.ok]
    again = converge(cluster, "apply", command="test-debian13-upgrade-again")
    assert again.ok and again.changed == 0, [
        (n, o.name) for n, r in again.nodes.items() for o in r.ops if o.status == "changed"]


def test_clean_jobs_at_26_05_are_namespace_tmpfs(upgraded):
    """slurm.clean_jobs turned on after the upgrade: NamespaceType=namespace/tmpfs with job_container.conf;
    alice's job's /tmp is its own (not the node's, not another user's concurrent job's) and gone after it."""
    vc = upgraded["vc"]
    cluster = _variant(vc, "clean", version=TO, clean_jobs=True)
    result = converge(cluster, "apply", command="test-debian13-clean-jobs")
    assert result.ok, failures(result)
    conf = ssh(vc, "ctl", "cat /etc/slurm/slurm.conf /etc/slurm/job_container.conf").stdout
    assert "NamespaceType=namespace/tmpfs" in conf and "JobContainerType" not in conf, conf
    assert "BasePath=/var/lib/slurm/job_tmp" in conf and re.search(r"^PrologFlags=(\S*,)?Contain\b", conf, re.M), conf
    job = alice(vc, "sbatch --parsable -w gpu01 -t 2 --output=/dev/null --wrap 'echo secret > /tmp/alice-secret; "
                    "sleep 60'")
    mine = f"find /var/lib/slurm/job_tmp -path '*{job}*' -name alice-secret"
    try:
        wait_for("alice's job to write its /tmp file", lambda: ssh(vc, "gpu01", mine, check=False).stdout.strip())
        assert ssh(vc, "gpu01", "test -e /tmp/alice-secret", check=False).returncode != 0  # not the node's /tmp
        other = ssh(vc, "ctl", "srun -w gpu01 -t 1 sh -c 'ls -A /tmp; echo end'").stdout
        assert other.split() == ["end"], other  # root's job beside hers: a /tmp of its own
    finally:
        ssh(vc, "ctl", f"scancel {job}", check=False)
    wait_for("alice's job to end", lambda: not ssh(vc, "ctl", f"squeue -h -j {job}", check=False).stdout.strip())
    wait_for("the job's /tmp to go", lambda: not ssh(vc, "gpu01", f"find /var/lib/slurm/job_tmp -path '*{job}*'",
                                                     check=False).stdout.strip(), 30)


def test_a_bundle_for_debian_13_carries_slurm_26_05(upgraded, tmp_path):
    """`corral bundle build` (the CLI, as a user runs it) of the Debian 13 spec at slurm.version 26.05: resolved
    against a clean trixie node from trixie's archive, with corral's Slurm 26.05 set as one more source; it
    verifies, says trixie, carries 26.05's daemons and holds every package each node needs."""
    import json
    import subprocess
    import sys
    import tarfile
    from corral.bundle import coverage
    from corral.bundle.verify import verify
    cluster = upgraded["cluster"]
    out = tmp_path / "deb13.tar"
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "corral", "bundle", "build", "--spec", str(cluster.path), "-o",
                           str(out), "--json"], capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-2000:] + proc.stdout[-2000:]
    built = json.loads(proc.stdout)
    print(f"debian-13 bundle with Slurm 26.05: {built['packages']} packages, {built['size'] / 1e6:.0f} MB, "
          f"{time.monotonic() - t0:.0f} s")
    checked = verify(out, built["fingerprint"])
    assert checked.ok, checked.problems
    content = checked.manifest
    assert content["distribution"] == "debian trixie"
    versions = {p["package"]: p["version"] for p in content["packages"]}
    assert versions["slurmd"] == "26.05.5-1+corral1" and versions["slurmctld"].startswith("26.05.5"), versions
    assert versions["slurmdbd"].startswith("26.05.5") and "slurm-wlm-basic-plugins" in versions
    assert coverage.gaps(cluster, content) == {}  # every node's packages, at the pinned Slurm
    with tarfile.open(out) as tar:
        release = tar.extractfile("repo/Release").read().decode()
    assert "Codename: trixie" in release
