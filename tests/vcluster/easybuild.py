"""EasyBuild on the workbench cluster (tests/vcluster/test_workbench.py runs these on its `bench`, whose spec
has `software.easybuild: {}` and the software manager `swmanager`, a users: entry with a Slurm account).
An easyconfig whose checksum is not its source's fails with the reason and EasyBuild's log kept on /sw, no
job left and no build directory.

A tiny easyconfig (the Tarball easyblock, SYSTEM toolchain: no compiler, a shell script on PATH) whose
source tarball the test serves over HTTP from the control host on the bridge address (a python http.server
it starts and stops by its PID) is built by `corral software build --json`, the command a site runs: a Slurm
job of swmanager on the build node (sacct says so; the job's own `id -u` is swmanager's; everything the build
wrote on /sw is swmanager's). Then as alice on login1 `module avail` lists it and `module load` puts its
program on PATH, and her batch job on the other compute node runs it. Not collected on its own (no test_
prefix): its tests need test_workbench's cluster."""

from __future__ import annotations

import hashlib
import io
import json
import os
import shlex
import subprocess
import sys
import tarfile
from pathlib import Path

from tests.vcluster.conftest import ssh
from tests.vcluster.test_users import as_alice

MANAGER, MANAGER_UID = "swmanager", 1500
SOURCE_PORT = 18136
HELLO = "#!/bin/sh\necho \"hello from corral's easyconfig on $(hostname) as $(id -un)\"\n"
EASYCONFIG = """easyblock = 'Tarball'
name = 'hello-corral'
version = '1.0'
homepage = '{url}'
description = "corral's test program: a shell script, installed as it is"
toolchain = SYSTEM
source_urls = ['{url}']
sources = ['hello-corral-1.0.tar.gz']
checksums = ['{sha256}']
sanity_check_paths = {{'files': ['bin/hello-corral'], 'dirs': []}}
sanity_check_commands = ['hello-corral']
moduleclass = 'tools'
"""


def manager_entry() -> dict:
    """What the bench's spec adds for EasyBuild: the software manager (builds are its Slurm jobs)."""
    return {"name": MANAGER, "uid": MANAGER_UID, "full_name": "software manager", "accounts": ["research"]}


def _tarball() -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        # a README beside bin/: EasyBuild starts in the tarball's top directory, not in its only subdirectory
        for name, mode, data in (("hello-corral-1.0", 0o755, None), ("hello-corral-1.0/bin", 0o755, None),
                                 ("hello-corral-1.0/bin/hello-corral", 0o755, HELLO.encode()),
                                 ("hello-corral-1.0/README", 0o644, b"corral's test program\n")):
            info = tarfile.TarInfo(name)
            info.mode, info.mtime = mode, 0
            if data is None:
                info.type = tarfile.DIRTYPE
                tar.addfile(info)
            else:
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def _build(vc, tmp: Path, name: str = "hello-corral", sha256: str | None = None) -> dict:
    """The source served from the control host while `corral software build --json` builds the easyconfig
    (`name`-1.0.eb; `sha256`: the checksum it names, else the tarball's)."""
    from corral.virtual.network import host_address
    served = tmp / "served"
    served.mkdir()
    data = _tarball()
    (served / "hello-corral-1.0.tar.gz").write_bytes(data)
    url = f"http://{host_address(vc.v.subnet)}:{SOURCE_PORT}/"
    ec = tmp / f"{name}-1.0.eb"
    ec.write_text(EASYCONFIG.replace("name = 'hello-corral'", f"name = {name!r}").format(
        url=url, sha256=sha256 or hashlib.sha256(data).hexdigest()))
    server = subprocess.Popen([sys.executable, "-m", "http.server", "--bind", host_address(vc.v.subnet),
                               "--directory", str(served), str(SOURCE_PORT)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "src")}
        proc = subprocess.run([sys.executable, "-m", "corral", "software", "build", str(ec), "--json",
                               "-f", str(vc.cluster.path)], capture_output=True, text=True, timeout=600, env=env)
    finally:
        server.terminate()
        server.wait(timeout=10)
    assert proc.stdout.strip(), proc.stderr
    return json.loads(proc.stdout) | {"rc": proc.returncode}


def test_a_failed_build_says_why_and_keeps_its_log(bench, tmp_path):
    result = _build(bench, tmp_path, name="hello-broken", sha256="0" * 64)  # the served tarball is not this
    assert not result["ok"] and result["rc"] == 1 and "checksum" in result["error"].lower(), result
    assert result["module"] == "hello-broken/1.0" and result["eb_log"], result
    assert ssh(bench, "login1", f"test -s {result['eb_log']} && test -s {result['log']}", check=False).returncode == 0
    assert not ssh(bench, "ctl", f"squeue -h -j {result['job']} -o %T", check=False).stdout.strip()  # not left
    left = ssh(bench, result["build_node"], "ls -A /var/lib/corral-easybuild/build").stdout.split()
    assert left == [], left


def test_easybuild_builds_an_easyconfig_as_a_slurm_job_of_the_software_manager(bench, tmp_path):
    result = _build(bench, tmp_path)
    assert result["ok"] and result["rc"] == 0, result
    assert result["module"] == "hello-corral/1.0" and result["user"] == MANAGER, result
    assert result["uid"] == str(MANAGER_UID), result  # the job's own `id -u`
    acct = ssh(bench, "ctl", f"sacct -X -n -P -j {result['job']} -o User,State,NodeList").stdout.split()
    assert acct == [f"{MANAGER}|COMPLETED|{result['build_node']}"], acct
    # everything the build wrote on /sw (on the NFS server's export) is the manager's, nothing root's
    tree = "/srv/nfs/sw/easybuild"
    made = ssh(bench, "ctl", f"find {tree}/software/hello-corral {tree}/modules/all/hello-corral "
                             f"{tree}/sources {tree}/easyconfigs -printf '%u %p\\n'").stdout.splitlines()
    assert made and all(line.startswith(f"{MANAGER} ") for line in made), made
    assert any(line.endswith("/modules/all/hello-corral/1.0.lua") for line in made), made
    # the build's local directory is gone (its own trap), the manager's directory stays 0700
    left = ssh(bench, result["build_node"], "stat -c '%U %a' /var/lib/corral-easybuild/build; "
                                            "ls -A /var/lib/corral-easybuild/build").stdout.split()
    assert left == [MANAGER, "700"], left


def test_alice_loads_what_easybuild_built_in_her_login_shell_and_her_batch_job(bench):
    out = as_alice(bench, "login1", "bash -lc " + shlex.quote(
        "module -t avail 2>&1 | grep '^hello-corral/[0-9]'; module load hello-corral && hello-corral"))
    assert out.stdout.splitlines() == ["hello-corral/1.0",
                                       "hello from corral's easyconfig on login1 as alice"], out.stdout + out.stderr
    script = "#!/bin/bash -l\nmodule load hello-corral/1.0\nhello-corral\n"
    as_alice(bench, "login1", f"printf '%s' {shlex.quote(script)} > ~/eb-hello.sh")
    job = as_alice(bench, "login1", "cd ~ && sbatch --parsable --wait -w gpu02 -t 2 --output=eb-hello-%j.out "
                                    "eb-hello.sh").stdout.strip()
    got = as_alice(bench, "login1", f"cat ~/eb-hello-{job}.out").stdout
    assert got == "hello from corral's easyconfig on gpu02 as alice\n", got
