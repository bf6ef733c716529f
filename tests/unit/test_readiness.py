"""deploy/operations.readiness run by a real shell: ready as soon as the test passes (polled every
50 ms at first), bounded by its timeout, the daemon's log lines on failure."""

from __future__ import annotations

import subprocess
import time

from corral.deploy.operations import readiness
from corral.engine.shell import q


def test_ready_soon_after_the_daemon_is(tmp_path):
    flag = tmp_path / "ready"
    script = f"(sleep 0.3; touch {q(flag)}) & " + readiness("demo", f"test -e {q(flag)}", "echo LOG", timeout_s=5)
    t0 = time.monotonic()
    proc = subprocess.run(["sh", "-c", script], capture_output=True, text=True, timeout=10)
    took = time.monotonic() - t0
    assert proc.returncode == 0 and proc.stderr == ""
    assert 0.3 <= took < 0.6, took  # not the next quarter second, nor a full second


def test_not_ready_fails_after_its_timeout_with_the_log_lines(tmp_path):
    t0 = time.monotonic()
    proc = subprocess.run(["sh", "-c", readiness("demo", "false", "echo 'last log line'", timeout_s=1)],
                          capture_output=True, text=True, timeout=10)
    took = time.monotonic() - t0
    assert proc.returncode == 1 and 0.9 <= took < 2.5, took
    assert proc.stderr.splitlines() == ["demo not ready after 1 s; last log lines:", "last log line"]
