"""render/quickack.py: the helper run by a real sh against a stand-in `ip` (it records what it was
asked), slurmdbd's drop-in, and the snapshot's reading of the local routes."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from corral.render import quickack

FAKE_IP = """#!/bin/sh
echo "$*" >> "$IP_LOG"
case "$*" in *" route show "*) [ -n "${ROUTE:-}" ] && echo "$ROUTE" ;; esac
exit 0
"""


def run_helper(tmp_path: Path, address: str, route: str) -> tuple[subprocess.CompletedProcess, list[str]]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "ip").write_text(FAKE_IP)
    (bin_dir / "ip").chmod(0o755)
    script = tmp_path / "local-quickack"
    script.write_text(quickack.render_script())
    script.chmod(0o755)
    log = tmp_path / "ip.log"
    log.write_text("")
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "IP_LOG": str(log), "ROUTE": route}
    done = subprocess.run([str(script), address], capture_output=True, text=True, env=env, timeout=10)
    return done, log.read_text().splitlines()


def test_a_route_without_quickack_gets_it_with_its_own_words(tmp_path):
    route = "local 10.0.0.5 dev eth0 proto kernel scope host src 10.0.0.5 "
    done, calls = run_helper(tmp_path, "10.0.0.5", route)
    assert done.returncode == 0, done.stderr
    assert calls == ["-4 route show table local exact 10.0.0.5 type local",
                     "-4 route change table local local 10.0.0.5 dev eth0 proto kernel scope host src 10.0.0.5 "
                     "quickack 1"]


def test_a_route_that_has_it_is_left_alone(tmp_path):
    done, calls = run_helper(tmp_path, "10.0.0.5", "local 10.0.0.5 dev eth0 proto kernel scope host src 10.0.0.5 quickack 1")
    assert done.returncode == 0 and len(calls) == 1 and "change" not in calls[0]


def test_an_address_the_node_lacks_changes_nothing_and_says_so(tmp_path):
    done, calls = run_helper(tmp_path, "192.0.2.1", "")
    assert done.returncode == 0
    assert "192.0.2.1 is not an address of this node" in done.stderr
    assert len(calls) == 1 and "change" not in calls[0]


def test_ipv6_uses_the_v6_table(tmp_path):
    done, calls = run_helper(tmp_path, "fd00::5", "local fd00::5 dev eth0 proto kernel metric 0 pref medium")
    assert done.returncode == 0, done.stderr
    assert calls[-1] == "-6 route change table local local fd00::5 dev eth0 proto kernel metric 0 pref medium quickack 1"


def test_no_address_is_a_usage_error(tmp_path):
    script = tmp_path / "local-quickack"
    script.write_text(quickack.render_script())
    done = subprocess.run(["sh", str(script)], capture_output=True, text=True, timeout=10)
    assert done.returncode != 0 and "usage: local-quickack ADDRESS" in done.stderr


def test_slurmdbd_runs_it_before_each_start_and_starts_even_if_it_fails():
    text = quickack.render_dropin("10.0.0.5")
    assert "[Service]\nExecStartPre=-/usr/local/lib/corral/local-quickack 10.0.0.5\n" in text
    assert quickack.DROPIN == "/etc/systemd/system/slurmdbd.service.d/corral-local-quickack.conf"


@pytest.mark.parametrize("line, want", [
    ("local 10.0.0.5 dev eth0 proto kernel scope host src 10.0.0.5 quickack 1 ", {"10.0.0.5": True}),
    ("local 10.0.0.5 dev eth0 proto kernel scope host src 10.0.0.5 ", {"10.0.0.5": False}),
    ("local 10.0.0.5 dev eth0 proto kernel scope host src 10.0.0.5 quickack 0", {"10.0.0.5": False}),
    ("broadcast 10.0.0.255 dev eth0 proto kernel scope link src 10.0.0.5", {}),
    ("", {}),
])
def test_local_routes_are_read_per_address(line, want):
    assert quickack.parse_local_routes([line]) == want
