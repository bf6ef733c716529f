"""validate's "user job" check through its seam: the login node's answer (the script's marked lines,
as the real script prints them) -> the verdict; the script itself runs as root and quotes the user."""

from __future__ import annotations

import subprocess

import pytest

from corral.checks import user_job as U
from corral.spec.loader import load_text

KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIMSXy+IKfJbqAmbJkf7ll8wgnvkLQm81CplM7d4miOLT alice@laptop"
SPEC = f"""\
name: lab
nodes:
  - {{names: ctl, addresses: [10.0.0.10], roles: [controller, accounting, nfs]}}
  - {{names: gpu01, addresses: [10.0.0.11], roles: [compute]}}
  - {{names: login1, addresses: [10.0.0.20], roles: [login]}}
storage:
  exports: [{{path: /srv/nfs/home}}]
  mounts: [{{path: /home, export: /srv/nfs/home}}]
slurm:
  accounts: [{{name: research}}]
users:
  - {{name: alice, uid: 2001, ssh_keys: ["{KEY}"], accounts: [research]}}
"""
M = U.MARK


def answer(text: str, rc: int = 0):
    calls = []

    def run(node, command, *, timeout):
        calls.append((node, command, timeout))
        return subprocess.CompletedProcess(command, rc, text, "")
    return run, calls


@pytest.fixture
def cluster():
    return load_text(SPEC, "cluster.yaml")


def test_ok_when_the_output_is_in_the_home_owned_by_the_user(cluster):
    run, calls = answer(f"{M} RC 0\n{M} JOB 17\n{M} SBATCH 17 \n{M} FILE alice gpu01 alice \n")
    check = U.user_job(cluster, run)
    assert (check.status, check.message) == ("OK", "alice's job 17 from login1 ran on gpu01 as alice; its output "
                                                   "is in alice's home on login1")
    (node, script, timeout), = calls
    assert node == "login1" and script.startswith("cd / || exit 1\nu=alice\n") and timeout == U.WAIT_S + 15
    assert "runuser -u \"$u\" -- timeout 150 sbatch --parsable --wait -t 3 -J corral-validate \\\n" in script
    assert 'runuser -u "$u" -- rm -f -- "$f"' in script


def test_bounded_by_the_job_phase_and_kept_off_skipped_nodes(cluster):
    run, calls = answer(f"{M} RC 0\n{M} JOB 17\n{M} FILE alice gpu01 alice \n")
    assert U.user_job(cluster, run, wait=42, exclude=["gpu03", "gpu02"]).status == "OK"
    (_, script, timeout), = calls
    assert timeout == 42 + 15
    assert "timeout 42 sbatch --parsable --wait -t 1 -J corral-validate -x 'gpu[02-03]' \\\n" in script
    check = U.user_job(cluster, run, blocked="not run: no compute node passed the reachability pass")
    assert (check.status, check.message) == ("FAIL", "not run: no compute node passed the reachability pass")
    assert len(calls) == 1  # nothing sent for a blocked check
    assert U.submitter(cluster) == "alice"


@pytest.mark.parametrize(("text", "message"), [
    (f"{M} RC 0\n{M} JOB 17\n{M} SBATCH 17\n", "job 17 of alice ran, but its output is not in alice's home on "
                                               "login1 (is the home shared with the compute nodes?)"),
    (f"{M} RC 1\n{M} JOB none\n{M} SBATCH sbatch: error: Batch job submission failed: Invalid account \n",
     "alice's job from login1 failed (sbatch rc=1): sbatch: error: Batch job submission failed: Invalid account"),
    (f"{M} RC 0\n{M} JOB 18\n{M} FILE root gpu01 root\n", "job 18: output owned by root, says 'gpu01 root' "
                                                           "(expected to run as alice)"),
    (f"{M} NOHOME\n", "alice has no home directory on login1"),
    (f"{M} STATE PENDING\n{M} RC 124\n{M} JOB 19\n", "alice's job 19 from login1 did not start within 150 s "
                                                     "(PENDING; cancelled)"),
    (f"{M} STATE RUNNING\n{M} RC 124\n{M} JOB 19\n", "alice's job 19 from login1 did not finish within 150 s "
                                                     "(RUNNING; cancelled)"),
    (f"{M} RC 124\n{M} JOB none\n", "sbatch as alice on login1 gave no job id within 150 s"),
])
def test_fail_verdicts_name_what_went_wrong(cluster, text, message):
    check = U.user_job(cluster, answer(text)[0])
    assert (check.status, check.message) == ("FAIL", message)


def test_skipped_without_login_node_users_or_shared_homes():
    no_login = load_text(SPEC.replace("  - {names: login1, addresses: [10.0.0.20], roles: [login]}\n", ""), "c.yaml")
    assert U.user_job(no_login, None).message == "no login node in the spec"
    local = load_text(SPEC.replace("storage:\n  exports: [{path: /srv/nfs/home}]\n  mounts: [{path: /home, export: "
                                   "/srv/nfs/home}]\n", "").replace("roles: [controller, accounting, nfs]",
                                                                     "roles: [controller, accounting]"), "c.yaml")
    assert U.user_job(local, None).message == "homes (/home) are on no shared mount"


def test_the_script_runs_in_sh_and_cancels_a_job_cut_off_by_the_bound(tmp_path):
    """The script under a real sh with stand-ins for getent/runuser/scancel: sbatch timed out after
    printing its id -> the job is cancelled and no output file is looked for as success."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    home = tmp_path / "home"
    home.mkdir()
    (bin_dir / "getent").write_text(f"#!/bin/sh\necho 'alice:x:2001:2001::{home}:/bin/bash'\n")
    (bin_dir / "runuser").write_text('#!/bin/sh\nshift 3\n[ "$1 $3" = "timeout sbatch" ] && { echo 42; exit 124; }\n'
                                     'exec "$@"\n')
    (bin_dir / "squeue").write_text("#!/bin/sh\necho PENDING\n")
    (bin_dir / "scancel").write_text(f"#!/bin/sh\necho \"$@\" > {tmp_path}/cancelled\n")
    for f in bin_dir.iterdir():
        f.chmod(0o755)
    script = U.script("alice", 5)
    proc = subprocess.run(["sh", "-c", script], capture_output=True, text=True,
                          env={"PATH": f"{bin_dir}:/usr/bin:/bin"}, timeout=30)
    got = U.parse(proc.stdout)
    assert got["RC"] == "124" and got["JOB"] == "42" and "FILE" not in got and got["STATE"] == "PENDING"
    assert (tmp_path / "cancelled").read_text() == "42\n"


def test_nothing_in_the_users_home_is_touched_as_root():
    """Root reading there follows the user's links (a link to /etc/shadow in place of the output would
    be printed in validate's report) and fails under root_squash: every command naming the home ($h)
    or the output ($f) runs as the user, the only exceptions the assignments and sbatch's own options."""
    for line in U.script("alice", 60, ["gpu01"]).splitlines():
        words = line.replace('"', " ").split()
        if not any(w.startswith(("$h", "$f", "--output=$h")) for w in words) or line.startswith(("h=", "f=")):
            continue
        if line.lstrip().startswith("-D "):
            continue  # the continuation of the sbatch line, which runs as the user
        assert 'runuser -u "$u" --' in line, line


def test_the_output_is_read_as_the_user_through_her_own_view(tmp_path):
    """READ, the user's side: a link in place of the output is read as the user reads it (here: a file
    she may read), and a missing file prints nothing (no FILE line)."""
    target = tmp_path / "t"
    target.write_text("gpu01 alice\n")
    link = tmp_path / "o"
    link.symlink_to(target)
    got = subprocess.run(["sh", "-c", U.READ, "sh", str(link)], capture_output=True, text=True, timeout=10)
    assert got.stdout.split()[1:] == ["gpu01", "alice"]
    missing = subprocess.run(["sh", "-c", U.READ, "sh", str(tmp_path / "none")], capture_output=True, text=True)
    assert missing.returncode != 0 and missing.stdout == ""
