"""Node health and the job prolog against what a job user controls, on the shared virtual cluster.

- A non-root user on gpu01 runs a binary named after an Xid line; it crashes, and the kernel's segfault
  record carries the name. A virtual node has no /dev/kmsg (systemd-nspawn hides it), so its journal
  never sees the record: the test takes the real record from the host kernel (the same kernel) and gives
  it to gpu01's real corral-health, as journald would, through a `journalctl` first on PATH. The node
  stays up and nothing is kept for later runs.
- A CPU-only job named after a GPU allocation (`… GRES=gpu:h100:4(IDX:0-3)`) is mapped to no GPU by the
  real prolog, while a GPU job beside it is.
"""

from __future__ import annotations

import base64
import json
import os
import shlex
import subprocess
import time
import uuid

import pytest

from tests.vcluster.conftest import settled, ssh

pytestmark = pytest.mark.vcluster
CRASHER_C = "void _start(void) { *(volatile int *)0 = 1; }\n"


@pytest.fixture(scope="module")
def node_cluster(shared_cluster):
    settled(shared_cluster, "test-security-node-apply")
    return shared_cluster


def crasher(tmp_path) -> bytes:
    """A static x86-64 program that segfaults in its own code (so the record names its file)."""
    (tmp_path / "c.c").write_text(CRASHER_C)
    subprocess.run(["gcc", "-static", "-nostdlib", "-O0", "-o", str(tmp_path / "crash"), str(tmp_path / "c.c")],
                   check=True)
    return (tmp_path / "crash").read_bytes()


def host_kmsg_records(token: str) -> list[str]:
    """The host kernel's /dev/kmsg records holding `token` (the test runs as root on the host)."""
    fd = os.open("/dev/kmsg", os.O_RDONLY | os.O_NONBLOCK)
    found = []
    try:
        while True:
            try:
                rec = os.read(fd, 65536).decode("utf-8", "replace")
            except BlockingIOError:
                break
            except BrokenPipeError:
                continue
            if token in rec:
                found.append(rec.splitlines()[0])
    finally:
        os.close(fd)
    return found


def as_journal_json(record: str) -> str:
    """A /dev/kmsg record as journald stores it (kernel transport; escapes undone), one JSON line."""
    head, message = record.split(";", 1)
    message = message.encode().decode("unicode_escape")
    return json.dumps({"__REALTIME_TIMESTAMP": str(int(time.time() * 1e6)), "_TRANSPORT": "kernel",
                       "SYSLOG_FACILITY": str(int(head.split(",")[0]) >> 3), "SYSLOG_IDENTIFIER": "kernel",
                       "MESSAGE": message})


@pytest.mark.skipif(os.geteuid() != 0 or not os.access("/dev/kmsg", os.R_OK), reason="needs the host's /dev/kmsg")
@pytest.mark.attack
def test_a_users_crash_named_after_an_xid_leaves_the_node_up(node_cluster, tmp_path):
    vc, token = node_cluster, uuid.uuid4().hex[:8]
    work, fake = f"/var/tmp/hx-{token}", f"/var/tmp/hx-fake-{token}"
    name = f"NVRM: Xid (PCI:0000:3b:00): 79, pid=1, GPU has fallen off the bus. {token}"
    blob = base64.b64encode(crasher(tmp_path)).decode()
    try:
        ssh(vc, "gpu01", f"mkdir -m 755 {work} && echo {blob} | base64 -d > {shlex.quote(f'{work}/{name}')} && "
                         f"chmod 755 {shlex.quote(f'{work}/{name}')}")
        crash = ssh(vc, "gpu01", f"cd {work} && setpriv --reuid=65534 --regid=65534 --clear-groups "
                                 f"{shlex.quote('./' + name)}; echo rc=$?", check=False)
        assert "rc=139" in crash.stdout, (crash.stdout, crash.stderr)  # SIGSEGV, as the ordinary user
        records = []
        for _ in range(20):
            records = [r for r in host_kmsg_records(token) if "segfault" in r]
            if records:
                break
            time.sleep(0.2)
        assert records, "the segfault record did not reach the kernel log"
        assert "NVRM: Xid (PCI:0000:3b:00): 79" in records[0]  # what the old line search drained on
        journal = "\n".join(as_journal_json(r) for r in records) + "\n"
        script = f'#!/bin/sh\necho "$*" >> {fake}/args\ncat <<\'EOF\'\n{journal}EOF\n'
        ssh(vc, "gpu01", f"mkdir -p {fake} && printf %s {shlex.quote(script)} > {fake}/journalctl && "
                         f"chmod 755 {fake}/journalctl")
        proc = ssh(vc, "gpu01", f"PATH={fake}:/usr/sbin:/usr/bin:/sbin:/bin /usr/local/sbin/corral-health --json",
                   check=False)
        out = json.loads(proc.stdout)
        xid = next(c for c in out["checks"] if c["name"] == "gpu_xid")
        assert "-o json" in ssh(vc, "gpu01", f"cat {fake}/args").stdout
        assert xid["status"] == "OK", xid
        assert out["action"] in ("none", "resumed"), out
        state = json.loads(ssh(vc, "gpu01", "cat /var/lib/corral/health-state.json").stdout)
        assert state["xid_sticky"] == []
        assert ssh(vc, "ctl", "sinfo -h -n gpu01 -o %T").stdout.strip() == "idle"
    finally:
        ssh(vc, "gpu01", f"rm -rf {work} {fake}", check=False)


@pytest.mark.attack
def test_a_job_name_naming_gpus_maps_a_cpu_job_to_none(node_cluster):
    vc = node_cluster
    crafted = "x Nodes=gpu01 CPU_IDs=0 Mem=1 GRES=gpu:h100:4(IDX:0-3)"
    cpu = ssh(vc, "ctl", f"sbatch --parsable -A research -w gpu01 -J {shlex.quote(crafted)} --wrap 'sleep 60'"
              ).stdout.strip()
    gpu = ssh(vc, "ctl", "sbatch --parsable -A research -w gpu01 --gres=gpu:h100:1 --wrap 'sleep 60'").stdout.strip()
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            states = ssh(vc, "ctl", f"squeue -h -j {cpu},{gpu} -o %T").stdout.split()
            if states == ["RUNNING", "RUNNING"]:
                break
            time.sleep(1)
        assert states == ["RUNNING", "RUNNING"], states
        assert crafted in ssh(vc, "ctl", f"scontrol show job -d {cpu}").stdout  # the name Slurm prints
        mapped = {}
        for _ in range(20):  # the prolog has run once the job is RUNNING; files are written before
            files = ssh(vc, "gpu01", "grep -H . /run/corral/gpu-jobs/* 2>/dev/null", check=False).stdout.split()
            mapped = {f.split(":", 1)[0].rsplit("/", 1)[1]: f.split(":", 1)[1] for f in files}
            if gpu in mapped.values():
                break
            time.sleep(0.5)
        assert list(mapped.values()) == [gpu], mapped   # the GPU job on its one GPU; the CPU job nowhere
    finally:
        ssh(vc, "ctl", f"scancel {cpu} {gpu}", check=False)
