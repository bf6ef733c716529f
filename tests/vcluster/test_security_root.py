"""Code and files root touches in places users can write, on a real virtual cluster (the usable one:
ctl also NFS node, gpu01-02, login1, alice; power on with the emulated BMC so that the BMC credentials
exist on ctl, nodes never idle long enough to be suspended here).

- `corral fanout` runs `python3 -m corral` as root on every compute node: a package named corral that
  alice planted in /tmp (where slurmstepd puts a step whose submitting directory is missing on the node)
  must never be imported;
- the Slurm exporter (network-facing) runs as its own unprivileged user, cannot read the BMC credentials,
  and still serves what Slurm says;
- validate's user-job check reads alice's output as alice: a link she swaps in for her job's output
  never makes root read a file she cannot.
"""

from __future__ import annotations

import json
import shlex

import pytest

from corral import paths
from corral.cli.main import main
from tests.vcluster.conftest import settled, ssh

pytestmark = pytest.mark.vcluster
MARKER = "/var/tmp/corral-planted-ran"
SECRET = "/etc/corral-test-secret"


@pytest.fixture(scope="module")
def vc(usable_cluster):
    """The usable cluster (tests/vcluster/conftest.py: power on with the emulated BMC), converged."""
    settled(usable_cluster, "test-security-root-apply")
    return usable_cluster


@pytest.mark.attack
def test_fanout_never_imports_a_corral_package_a_user_planted_in_tmp(vc, capsys, monkeypatch):
    from corral.fanout import slurm as fanout_slurm
    payload = f"import os\nopen({MARKER!r}, 'w').write(str(os.getuid()))\n"
    for node in ("gpu01", "gpu02"):
        ssh(vc, node, f"rm -rf /tmp/corral {MARKER}; runuser -u alice -- sh -c "
                      + shlex.quote(f"mkdir /tmp/corral && printf %s {shlex.quote(payload)} > /tmp/corral/__init__.py"
                                    f" && cp /tmp/corral/__init__.py /tmp/corral/__main__.py"))
    script = fanout_slurm.script
    # a submitting directory that exists on the controller only (an admin's home there, say): slurmstepd
    # then starts the steps in /tmp on the nodes
    monkeypatch.setattr(fanout_slurm, "script", lambda *a, **k: (
        "mkdir -p /var/tmp/corral-ctl-only && cd /var/tmp/corral-ctl-only\n" + script(*a, **k)))
    try:
        rc = main(["fanout", "-f", str(vc.cluster.path), "--json"])
        data = json.loads(capsys.readouterr().out)
        for node in ("gpu01", "gpu02"):
            ran = ssh(vc, node, f"cat {MARKER} 2>/dev/null; true").stdout
            assert ran == "", f"{node}: alice's /tmp/corral ran as uid {ran}"
        assert rc == 0 and data["ok"], json.dumps(data, indent=1)[:3000]
    finally:
        for node in ("gpu01", "gpu02"):
            ssh(vc, node, f"rm -rf /tmp/corral {MARKER}")


def _exporter(vc) -> tuple[str, str]:
    pid = ssh(vc, "ctl", "systemctl show -p MainPID --value corral-slurm-exporter").stdout.strip()
    assert pid.isdigit() and pid != "0", pid
    return pid, ssh(vc, "ctl", f"ps -o user= -p {pid}").stdout.strip()


@pytest.mark.attack
def test_the_slurm_exporter_runs_unprivileged_cannot_read_the_bmc_credentials_and_serves(vc):
    pid, user = _exporter(vc)
    assert user not in ("root", "slurm"), user
    groups = ssh(vc, "ctl", f"id -nG {shlex.quote(user)}").stdout.split()
    assert "slurm" not in groups and "root" not in groups, groups
    assert ssh(vc, "ctl", f"stat -c '%U %a' {paths.BMC_CREDENTIALS}").stdout.split() == ["slurm", "600"]
    # as the process itself: its uid, gid and supplementary groups
    st = dict(line.split(":", 1) for line in ssh(vc, "ctl", f"cat /proc/{pid}/status").stdout.splitlines() if ":" in line)
    groups = ",".join(st["Groups"].split())
    as_it = (f"setpriv --reuid={st['Uid'].split()[0]} --regid={st['Gid'].split()[0]} "
             + (f"--groups={groups}" if groups else "--clear-groups"))
    denied = ssh(vc, "ctl", f"{as_it} cat {paths.BMC_CREDENTIALS}", check=False)
    assert denied.returncode != 0 and not denied.stdout, denied.stdout
    status = ssh(vc, "ctl", f"grep -E '^(NoNewPrivs|CapEff)' /proc/{pid}/status").stdout.split()
    assert status[status.index("NoNewPrivs:") + 1] == "1" and status[status.index("CapEff:") + 1] == "0" * 16, status
    address, port = vc.node("ctl").node.address, vc.cluster.spec.monitoring.slurm_exporter_port
    metrics = ssh(vc, "ctl", "python3 -I -c " + shlex.quote(
        f"import urllib.request; print(urllib.request.urlopen('http://{address}:{port}/metrics', timeout=20)"
        f".read().decode())")).stdout
    assert 'corral_slurm_nodes{state="idle"}' in metrics and "corral_slurm_slurmctld_up 1.0" in metrics
    assert "corral_slurm_slurmdbd_up 1.0" in metrics and 'corral_slurm_command_error{command="sdiag"} 0.0' in metrics
    assert 'corral_slurm_command_error{command="squeue"} 0.0' in metrics


def _user_job(vc):
    from corral.checks.user_job import user_job
    from corral.engine.remote import run_on
    return user_job(vc.cluster, lambda node, command, **kw: run_on(vc.cluster, node, command, **kw), wait=90)


@pytest.mark.attack
def test_validates_user_job_reads_her_output_as_her(vc):
    check = _user_job(vc)
    assert check.status == "OK", check
    ssh(vc, "login1", f"umask 077 && echo TOPSECRET-corral-test > {SECRET}")
    # alice turns her job's output into a link to a file only root can read, as soon as it has content
    swap = ("for i in $(seq 1800); do for f in \"$HOME\"/.corral-validate-*.out; do "
            f"[ -s \"$f\" ] && [ ! -L \"$f\" ] && ln -sfn {SECRET} \"$f\"; done; sleep 0.05; done")
    ssh(vc, "login1", f"runuser -u alice -- setsid sh -c {shlex.quote('echo $$ > /tmp/corral-swap.pid; ' + swap)} "
                      ">/dev/null 2>&1 </dev/null &")
    try:
        check = _user_job(vc)
        assert "TOPSECRET" not in f"{check.message} {check.nodes}", check
    finally:
        ssh(vc, "login1", "kill $(cat /tmp/corral-swap.pid) 2>/dev/null; "
                          f"rm -f /tmp/corral-swap.pid {SECRET} /home/alice/.corral-validate-*.out")
