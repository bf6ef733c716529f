"""corral-health against text a job user can put into the kernel log (security finding: any user could
drain every GPU node until reboot with a binary named after an Xid line; the segfault record carries the
file name). The records are real: captured from /dev/kmsg after a non-root user ran such a binary
(tests/fixtures/health/README.md)."""

from __future__ import annotations

import pytest
import json
import shutil
import sys
import time
from pathlib import Path

from corral.node import health_checks as C

from test_health_run import FIX, checks, node, run, scontrol_calls  # noqa: F401 - node: the fixture

# journalctl answering in the format it is asked for (short-unix text or json records)
FAKE_JOURNALCTL = """#!/bin/sh
echo "$*" >> "$FAKE/journalctl.args"
case "$*" in *json*) cat "$FAKE/journal.json" ;; *) cat "$FAKE/journal.txt" ;; esac
"""


def journal(node, name: str) -> None:
    """The node's kernel journal: the fixture `name` in both of journalctl's formats."""
    (node["tmp"] / "bin" / "journalctl").write_text(FAKE_JOURNALCTL)
    for ext in ("txt", "json"):
        src = FIX / f"{name}.{ext}"
        shutil.copy(src, node["fake"] / f"journal.{ext}") if src.exists() else (
            node["fake"] / f"journal.{ext}").write_text("")


@pytest.mark.attack
def test_a_users_segfault_named_after_an_xid_never_drains(node, capsys):
    """`NVRM: Xid (PCI:0000:3b:00): 79, …` as a crashing binary's file name (and after a newline in it):
    the node is not drained and nothing is kept for later runs."""
    journal(node, "journalctl-k-hostile-segfault")
    rc, out = run(node, capsys, "--slurm")
    assert checks(out)["gpu_xid"][0] == "OK", checks(out)["gpu_xid"]
    assert rc == 0 and out["action"] == "none" and scontrol_calls(node) == []
    state = json.loads(Path(node["cfg"]["state_file"]).read_text())
    assert state["xid_sticky"] == []


def test_an_uncorroborated_xid_drains_for_one_run_only(node, capsys):
    """A genuine-looking NVRM record for a GPU nvidia-smi lists healthy (0000:3a:00 of the H100 capture):
    drained with a reason that says so, nothing kept, resumed by the next run."""
    rec = {"_TRANSPORT": "kernel", "SYSLOG_FACILITY": "0", "__REALTIME_TIMESTAMP": "1749532840414765",
           "MESSAGE": "NVRM: Xid (PCI:0000:3a:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus."}
    (node["fake"] / "journal.txt").write_text(json.dumps(rec) + "\n")
    rc, out = run(node, capsys, "--slurm")
    reason = "corral: xid 79 on 0000:3a:00, uncorroborated by nvidia-smi (GPU has fallen off the bus.)"
    assert rc == 1 and scontrol_calls(node) == [f"update nodename=gpu01 state=drain reason={reason}"]
    assert json.loads(Path(node["cfg"]["state_file"]).read_text())["xid_sticky"] == []
    (node["fake"] / "journal.txt").write_text("")
    shutil.copy(FIX / "scontrol-node-drained-corral.txt", node["fake"] / "scontrol.txt")
    rc, out = run(node, capsys, "--slurm")
    assert rc == 0 and out["action"] == "resumed"


def test_the_kmsg_probe_passes_records_through():
    argv = [sys.executable, "-I", "-S", "-c", C.KMSG_PROBE, str(FIX / "kmsg-hostile-segfault.txt")]
    p = C.run_probes([C.Probe("kernel-log", argv)], time.monotonic() + 10)["kernel-log"]
    assert p.failure() == "" and p.out == (FIX / "kmsg-hostile-segfault.txt").read_text()
