"""Node code that a cluster user can reach: the prolog's GPU job-map files must not be a way to make root
write through a planted link (jobhooks.py), and one idle client must not stall the Slurm exporter
(slurm_exporter.py). Each test plays the attack first; they run as root, as the hooks do."""

from __future__ import annotations

import json
import os
import socket
import stat
import threading
import time
import urllib.request

import pytest
from prometheus_client.core import CollectorRegistry

from corral.node import jobhooks as J
from corral.node import slurm_exporter as E

from test_slurm_exporter import HEALTHY, runner  # the captured Slurm outputs

@pytest.fixture
def parent(tmp_path):
    """A parent of the map directory that anyone may write to, not sticky (the finding's setting)."""
    p = tmp_path / "run"
    p.mkdir()
    p.chmod(0o777)
    return p


@pytest.fixture
def victim(tmp_path):
    v = tmp_path / "victim"
    v.write_text("precious\n")
    v.chmod(0o600)
    return v


def unchanged(victim) -> bool:
    return victim.read_text() == "precious\n" and stat.S_IMODE(victim.stat().st_mode) == 0o600


def hook(tmp_path, monkeypatch, directory, gpus="0,1", **config) -> list[str]:
    """Run the prolog of job 42 as slurmd would; return what it logged."""
    cfg = tmp_path / "jobhooks.json"
    cfg.write_text(json.dumps({"gpu_job_map_dir": str(directory), "gpu_count": 4, **config}))
    monkeypatch.setattr(J, "CONFIG", str(cfg))
    logged: list[str] = []
    monkeypatch.setattr(J.syslog, "syslog", lambda prio, msg: logged.append(msg))
    env = {"SLURM_JOB_ID": "42", "SLURM_JOB_GPUS": gpus, "SLURM_JOB_UID": "1000"}
    assert J.main(["prolog"], env) == 0  # never fails the job
    return logged


def test_a_link_at_the_old_temp_name_beside_the_directory_is_not_followed(parent, victim, tmp_path, monkeypatch):
    d = parent / "gpu-jobs"
    for gpu in (0, 1):  # where the old prolog wrote, then chmod'ed, then renamed its temp file
        os.symlink(victim, f"{d}.{gpu}.{os.getpid()}.tmp")
    assert hook(tmp_path, monkeypatch, d) == []
    assert unchanged(victim)
    for gpu in (0, 1):
        assert not (d / str(gpu)).is_symlink() and (d / str(gpu)).read_text() == "42\n"
        assert stat.S_IMODE((d / str(gpu)).stat().st_mode) == 0o644
    assert sorted(p.name for p in d.iterdir()) == ["0", "1"]


def test_a_link_at_the_temp_name_inside_the_directory_is_not_followed(parent, victim, tmp_path, monkeypatch):
    d = parent / "gpu-jobs"
    d.mkdir(mode=0o755)
    os.symlink(victim, d / f".0.{os.getpid()}.tmp")  # only root could put it there; still never followed
    hook(tmp_path, monkeypatch, d, gpus="0")
    assert unchanged(victim) and (d / "0").read_text() == "42\n" and sorted(p.name for p in d.iterdir()) == ["0"]


def test_a_link_at_the_lock_is_refused_and_logged(parent, victim, tmp_path, monkeypatch):
    d = parent / "gpu-jobs"
    os.symlink(victim, f"{d}.lock")
    logged = hook(tmp_path, monkeypatch, d)
    assert unchanged(victim) and list(d.iterdir()) == []
    assert len(logged) == 1 and "corral prolog: job 42" in logged[0] and "refusing" in logged[0]
    missing = tmp_path / "created-by-root"  # the old O_CREAT made the link's target: root's file anywhere
    os.unlink(f"{d}.lock")
    os.symlink(missing, f"{d}.lock")
    assert "refusing" in hook(tmp_path, monkeypatch, d)[0] and not missing.exists()


def test_a_linked_map_directory_is_refused(parent, tmp_path, monkeypatch):
    elsewhere = tmp_path / "elsewhere"  # e.g. /etc/cron.d: the old prolog wrote "0", "1" in it
    elsewhere.mkdir()
    os.symlink(elsewhere, parent / "gpu-jobs")
    for d in (parent / "gpu-jobs", f"{parent / 'gpu-jobs'}/"):  # a trailing slash would follow the link
        logged = hook(tmp_path, monkeypatch, d)
        assert list(elsewhere.iterdir()) == [] and "refusing" in logged[0] and "not a plain directory" in logged[0]
    os.symlink(tmp_path / "nowhere", parent / "dangling")
    assert "refusing" in hook(tmp_path, monkeypatch, parent / "dangling")[0]
    assert not (tmp_path / "nowhere").exists()


@pytest.mark.skipif(os.geteuid() != 0, reason="chown needs root")
def test_a_map_directory_or_lock_a_user_owns_or_may_write_is_refused(parent, tmp_path, monkeypatch):
    d, lock = parent / "gpu-jobs", parent / "gpu-jobs.lock"
    d.mkdir(mode=0o755)
    os.chown(d, 65534, 65534)
    assert "owner uid 65534" in hook(tmp_path, monkeypatch, d)[0] and list(d.iterdir()) == []
    os.chown(d, 0, 0)
    d.chmod(0o777)
    assert "mode 777" in hook(tmp_path, monkeypatch, d)[0] and list(d.iterdir()) == []
    d.chmod(0o755)
    lock.touch(mode=0o666)
    os.chown(lock, 65534, 65534)  # its owner could hold a flock on it forever and hang every prolog
    assert "refusing" in hook(tmp_path, monkeypatch, d)[0] and list(d.iterdir()) == []


def test_a_refused_map_still_makes_the_user_dirs(parent, victim, tmp_path, monkeypatch):
    os.symlink(victim, f"{parent / 'gpu-jobs'}.lock")
    made = []
    monkeypatch.setattr(J, "user_dirs", lambda hook, dirs, env: made.append(hook) or [])
    logged = hook(tmp_path, monkeypatch, parent / "gpu-jobs", user_dirs=[{"path": "/x"}])
    assert made == ["prolog"] and unchanged(victim) and "refusing" in logged[0]


def test_map_files_get_their_mode_whatever_the_umask(parent, tmp_path, monkeypatch):
    old = os.umask(0o077)
    try:
        J.map_gpus(str(parent / "gpu-jobs"), "5", [3], add=True)
    finally:
        os.umask(old)
    assert stat.S_IMODE((parent / "gpu-jobs" / "3").stat().st_mode) == 0o644
    assert sorted(p.name for p in parent.iterdir()) == ["gpu-jobs", "gpu-jobs.lock"]  # nothing else beside it


@pytest.fixture
def exporter(monkeypatch):
    """The exporter on 127.0.0.1 (a free port) in a thread; stopped, and its handler threads gone, after."""
    monkeypatch.setattr(E.QuietHandler, "timeout", 3.0)  # E.IDLE_TIMEOUT (5 s) in production
    registry = CollectorRegistry()
    registry.register(E.SlurmCollector(run=runner(HEALTHY)))
    server = E.make_server_for("127.0.0.1:0", registry)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
        end = time.monotonic() + 5
        while any("process_request" in t.name for t in threading.enumerate()) and time.monotonic() < end:
            time.sleep(0.05)
        assert not thread.is_alive() and not any("process_request" in t.name for t in threading.enumerate())


def get_metrics(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        assert r.status == 200
        return r.read().decode()


def test_an_idle_connection_does_not_stall_the_scrapes(exporter):
    port = exporter.server_address[1]
    with socket.create_connection(("127.0.0.1", port)) as idle:  # connects and sends nothing
        time.sleep(0.1)  # accepted first: the old single-threaded server sat in its read
        assert 'corral_slurm_node_gpus{node="gpu01",type="h100"} 4.0' in get_metrics(port)
        idle.setblocking(False)  # served beside the idle one: that one is still open
        with pytest.raises(BlockingIOError):
            idle.recv(1)
        idle.settimeout(10)
        assert idle.recv(1) == b""  # then closed by the server after its seconds of silence


@pytest.fixture
def two_slots(monkeypatch):
    monkeypatch.setattr(E, "MAX_CONNECTIONS", 2)


def test_connections_over_the_bound_are_closed_at_once(two_slots, exporter):
    port = exporter.server_address[1]
    socks = [socket.create_connection(("127.0.0.1", port), timeout=5) for _ in range(3)]
    try:
        start = time.monotonic()
        assert socks[2].recv(1) == b"" and time.monotonic() - start < 1  # the third: no slot, closed at once
    finally:
        for s in socks:
            s.close()
    end = time.monotonic() + 5
    while exporter.slots._value < 2 and time.monotonic() < end:  # the two threads give their slots back
        time.sleep(0.05)
    assert "corral_slurm_slurmctld_up 1.0" in get_metrics(port)


def test_the_exporter_binds_the_address_it_is_given():
    for listen, family in (("127.0.0.1:0", socket.AF_INET), ("[::1]:0", socket.AF_INET6)):
        try:
            server = E.make_server_for(listen, CollectorRegistry())
        except OSError:  # no IPv6 here
            continue
        try:
            assert server.address_family == family and server.server_address[0] == listen[:-2].strip("[]")
            assert isinstance(server, E.ThreadingWSGIServer) and server.daemon_threads
            assert E.QuietHandler.timeout == E.IDLE_TIMEOUT and 1 <= E.IDLE_TIMEOUT <= 10
        finally:
            server.server_close()
