"""corral-health end to end on this machine: fake nvidia-smi / journalctl / scontrol / systemctl on PATH,
the real probe runner, the hard time bound with real hanging subprocesses, stdlib-only."""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from corral.node import health, health_checks as C

NODE_DIR = Path(health.__file__).resolve().parent
FIX = Path(__file__).resolve().parents[1] / "fixtures" / "health"

FAKE_SMI = """#!/bin/sh
case "$*" in
  *index,name,memory.total*) cat "$FAKE/query-gpu.csv" ;;
  *temperature.gpu*) cat "$FAKE/query-temp.csv" ;;
  *-q*) cat "$FAKE/q.txt" ;;
esac
"""
FAKE_JOURNALCTL = '#!/bin/sh\necho "$*" >> "$FAKE/journalctl.args"\ncat "$FAKE/journal.txt"\n'
FAKE_SCONTROL = """#!/bin/sh
if [ "$1" = show ]; then [ -n "$FAKE_HANG" ] && sleep 3600; cat "$FAKE/scontrol.txt"; exit 0; fi
echo "$*" >> "$FAKE/scontrol.log"
"""
FAKE_SYSTEMCTL = '#!/bin/sh\nshift\nfor s in "$@"; do echo active; done\n'


@pytest.fixture
def node(tmp_path, monkeypatch):
    """A fake GPU node: 4 emulated H100 device files, tools on PATH answering from fixtures."""
    fake, bin_dir, dev = tmp_path / "fake", tmp_path / "bin", tmp_path / "dev"
    for d in (fake, bin_dir, dev):
        d.mkdir()
    for name, text in (("nvidia-smi", FAKE_SMI), ("journalctl", FAKE_JOURNALCTL),
                       ("scontrol", FAKE_SCONTROL), ("systemctl", FAKE_SYSTEMCTL)):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    for i in range(4):
        (dev / f"nvidia{i}").touch()
    (dev / "nvidiactl").touch()
    first4 = (FIX / "query-gpu-h100x8.csv").read_text().splitlines(True)[:4]
    (fake / "query-gpu.csv").write_text("".join(first4))
    shutil.copy(FIX / "query-temp-a100x4.csv", fake / "query-temp.csv")
    shutil.copy(FIX / "nvidia-smi-q-ecc-h100x8.txt", fake / "q.txt")
    shutil.copy(FIX / "journalctl-k-empty.txt", fake / "journal.txt")
    shutil.copy(FIX / "scontrol-node-idle.txt", fake / "scontrol.txt")
    boot_id = tmp_path / "boot_id"
    boot_id.write_text("1b1e7d3a-0000-4000-8000-000000000001\n")
    monkeypatch.setattr(health, "BOOT_ID_FILE", str(boot_id))
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    monkeypatch.setenv("FAKE", str(fake))
    monkeypatch.delenv("FAKE_HANG", raising=False)
    cfg = {"node": "gpu01", "expected_gpus": 4, "gpu_model": "h100", "max_gpu_temp_c": 85, "mounts": [],
           "services": ["munge", "slurmd"], "min_free_mb": {str(tmp_path): 1}, "timeout_s": 20,
           "state_file": str(tmp_path / "state" / "health-state.json"), "dev_dir": str(dev)}
    conf = tmp_path / "health.json"
    conf.write_text(json.dumps(cfg))
    return {"fake": fake, "dev": dev, "conf": conf, "cfg": cfg, "boot_id": boot_id, "tmp": tmp_path}


def run(node, capsys, *args) -> tuple[int, dict]:
    rc = health.main(["--config", str(node["conf"]), "--json", *args])
    return rc, json.loads(capsys.readouterr().out)


def checks(out: dict) -> dict:
    return {c["name"]: (c["status"], c["message"]) for c in out["checks"]}


def scontrol_calls(node) -> list[str]:
    log = node["fake"] / "scontrol.log"
    return log.read_text().splitlines() if log.exists() else []


def test_healthy_gpu_node(node, capsys):
    rc, out = run(node, capsys, "--act")
    assert rc == 0 and out["ok"] is True, out
    c = checks(out)
    assert c["gpu_count"] == ("OK", "gpu count 4")
    assert c["gpu_xid"][0] == "OK" and c["gpu_ecc"][0] == "OK" and c["services"][0] == "OK"
    assert c["gpu_temp"] == ("OK", "max 25 C (limit 85 C)")
    assert out["action"] == "none" and out["action_detail"] == "healthy"
    assert scontrol_calls(node) == []


def test_missing_gpu_drains_with_a_corral_reason(node, capsys):
    (node["dev"] / "nvidia3").unlink()
    rc, out = run(node, capsys, "--slurm")
    assert rc == 1 and out["ok"] is False
    assert checks(out)["gpu_count"] == ("FAIL", "gpu count 3 < 4")
    assert out["action"] == "drained"
    assert scontrol_calls(node) == ["update nodename=gpu01 state=drain reason=corral: gpu count 3 < 4"]


def test_lower_count_wins_when_nvidia_smi_sees_fewer(node, capsys):
    (node["fake"] / "query-gpu.csv").write_text((FIX / "standin-query-gpu-3of4.csv").read_text())
    rc, out = run(node, capsys)
    assert checks(out)["gpu_count"] == ("FAIL", "gpu count 3 < 4")
    assert [c.get("detail") for c in out["checks"] if c["name"] == "gpu_count"] == ["devices 4, nvidia-smi 3"]
    assert out["action"] == "none" and scontrol_calls(node) == []   # no --act: Slurm untouched


def test_already_drained_with_the_same_reason(node, capsys):
    (node["dev"] / "nvidia3").unlink()
    shutil.copy(FIX / "scontrol-node-drained-corral.txt", node["fake"] / "scontrol.txt")
    rc, out = run(node, capsys, "--act")
    assert rc == 1 and out["action"] == "none" and scontrol_calls(node) == []


def test_healthy_again_resumes_corrals_drain_only(node, capsys):
    shutil.copy(FIX / "scontrol-node-drained-corral.txt", node["fake"] / "scontrol.txt")
    assert run(node, capsys, "--act")[1]["action"] == "resumed"
    assert scontrol_calls(node) == ["update nodename=gpu01 state=resume"]
    shutil.copy(FIX / "scontrol-node-drained-admin.txt", node["fake"] / "scontrol.txt")
    out = run(node, capsys, "--act")[1]
    assert out["action"] == "none" and "bad dimm" in out["action_detail"]
    assert scontrol_calls(node) == ["update nodename=gpu01 state=resume"]


def test_ecc_failure_drains(node, capsys):
    shutil.copy(FIX / "nvidia-smi-q-ecc-h100x8-errors.txt", node["fake"] / "q.txt")
    rc, out = run(node, capsys, "--act")
    assert checks(out)["gpu_ecc"][0] == "FAIL"
    assert scontrol_calls(node)[0].startswith(
        "update nodename=gpu01 state=drain reason=corral: gpu 00000000:3A:00.0: 2 uncorrectable ECC errors")


def test_xid_stays_failed_until_reboot_or_clear(node, capsys):
    # the GPUs an earlier run listed at the fixture's Xid addresses (a missing one is evidence only there)
    state_file = Path(node["cfg"]["state_file"])
    state_file.parent.mkdir(parents=True, exist_ok=True)
    state_file.write_text(json.dumps({"gpus_seen": ["0000:01:00", "0000:05:00", "0000:10:1c"]}))
    shutil.copy(FIX / "journalctl-k-xid.json", node["fake"] / "journal.txt")
    first = checks(run(node, capsys)[1])["gpu_xid"]
    assert first[0] == "FAIL" and first[1].startswith("xid 63 on 0000:10:1c")
    (node["fake"] / "journal.txt").write_text("")
    assert checks(run(node, capsys)[1])["gpu_xid"] == first           # nothing new, still failing
    args = (node["fake"] / "journalctl.args").read_text().splitlines()
    assert "--since" not in args[0] and "--since @" in args[1]        # first run reads the whole boot
    assert checks(run(node, capsys, "--clear-xid")[1])["gpu_xid"][0] == "OK"
    shutil.copy(FIX / "journalctl-k-xid.json", node["fake"] / "journal.txt")
    assert checks(run(node, capsys)[1])["gpu_xid"][0] == "OK"          # old lines: before the last run
    state = json.loads(Path(node["cfg"]["state_file"]).read_text())
    state["xid_sticky"] = [{"ts": 1.0, "pci": "0000:05:00", "xid": 79, "text": "GPU has fallen off the bus."}]
    Path(node["cfg"]["state_file"]).write_text(json.dumps(state))
    assert checks(run(node, capsys)[1])["gpu_xid"][0] == "FAIL"
    (node["fake"] / "journal.txt").write_text("")                     # a new boot's kernel log
    node["boot_id"].write_text("after-a-reboot\n")
    assert checks(run(node, capsys)[1])["gpu_xid"][0] == "OK"


def test_cpu_node_skips_gpu_checks(node, capsys):
    for f in node["dev"].iterdir():
        f.unlink()
    cfg = dict(node["cfg"], expected_gpus=0)
    node["conf"].write_text(json.dumps(cfg))
    rc, out = run(node, capsys)
    assert rc == 0
    assert [checks(out)[n][0] for n in ("gpu_count", "gpu_xid", "gpu_ecc", "gpu_temp")] == ["SKIPPED"] * 4


def test_bad_config_exits_2(tmp_path, capsys):
    assert health.main(["--config", str(tmp_path / "missing.json")]) == 2
    (tmp_path / "c.json").write_text('{"expected_gpus": "four"}')
    assert health.main(["--config", str(tmp_path / "c.json")]) == 2
    assert "expected_gpus" in capsys.readouterr().err


def test_fs_probe_in_a_child(tmp_path):
    argv = [sys.executable, "-I", "-S", "-c", C.FS_PROBE, str(tmp_path), "1"]
    got = C.run_probes([C.Probe("path:x", argv)], time.monotonic() + 10)
    r = C.fs_results(got)["x"]
    assert r["exists"] is True and r["ismount"] is False and r["writable"] is True and r["free_mb"] > 0
    assert list(tmp_path.iterdir()) == []


def _live_members(pgid: int) -> list[int]:
    pids = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            pids.append(int(stat.parent.name))
    return pids


def test_hung_probe_and_its_children_are_killed_at_the_deadline():
    hang = C.Probe("hang", ["sh", "-c", "sleep 3600 & sleep 3600"])
    quick = C.Probe("quick", ["sh", "-c", "echo hi"])
    t0 = time.monotonic()
    got = C.run_probes([hang, quick], t0 + 1.0)
    assert time.monotonic() - t0 < 3
    assert got["quick"].out == "hi\n" and got["quick"].failure() == ""
    assert got["hang"].timed_out and got["hang"].failure() == "probe hang timed out after 1 s"
    deadline = time.monotonic() + 3
    while _live_members(hang.pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _live_members(hang.pid) == []


SYSTEM_PYTHON = shutil.which("python3", path="/usr/local/bin:/usr/bin:/bin")


@pytest.mark.skipif(SYSTEM_PYTHON is None, reason="no python3 on the default PATH")
def test_whole_run_is_bounded_with_a_hanging_probe(tmp_path):
    """Run as slurmd runs it: the program itself, env = SLURMD_NODENAME only (no PATH), through /bin/sh
    and a fresh python3; bound 2 s and a `sleep 3600` probe."""
    cfg = {"expected_gpus": 0, "mounts": [], "min_free_mb": {str(tmp_path): 1}, "timeout_s": 2,
           "test_hang_probe": True, "state_file": str(tmp_path / "state.json"), "dev_dir": str(tmp_path)}
    (tmp_path / "health.json").write_text(json.dumps(cfg))
    t0 = time.monotonic()
    argv = ["/bin/sh", "-c", 'exec python3 "$0" --config "$1" --json', str(NODE_DIR / "health.py"),
            str(tmp_path / "health.json")]
    proc = subprocess.run(argv, env={"SLURMD_NODENAME": "gpu01"}, capture_output=True, text=True, timeout=30)
    elapsed = time.monotonic() - t0
    assert elapsed < 5, elapsed
    out = json.loads(proc.stdout)
    assert proc.returncode == 1 and out["ok"] is False and out["node"] == "gpu01"
    status, message = checks(out)["test_hang"]
    assert status == "FAIL" and re.fullmatch(r"probe test-hang timed out after 1\.\d s", message), message
    assert checks(out)["free_space"][0] == "OK"


def test_hanging_scontrol_is_bounded_too(node, capsys, monkeypatch):
    monkeypatch.setenv("FAKE_HANG", "1")
    node["conf"].write_text(json.dumps(dict(node["cfg"], timeout_s=3)))
    t0 = time.monotonic()
    rc, out = run(node, capsys, "--slurm")
    assert time.monotonic() - t0 < 5
    assert rc == 0 and out["action"] == "error"
    assert out["action_detail"].startswith("probe scontrol-show timed out after")


# node programs that need a distribution package, installed by their deploy
NODE_PACKAGES = {"slurm_exporter.py": {"prometheus_client"},  # python3-prometheus-client
                 "notebook_check.py": {"tornado"},  # run by the notebook hub's venv python (JupyterHub's tornado)
                 "registry_auth.py": {"cryptography"}}  # python3-cryptography (deploy/registry_auth.py)  # run by the notebook hub's venv python (JupyterHub's tornado)


def test_node_code_is_stdlib_only():
    stdlib = set(sys.stdlib_module_names)
    for path in sorted(NODE_DIR.glob("*.py")):
        allowed = stdlib | NODE_PACKAGES.get(path.name, set())
        for n in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in n.names] if isinstance(n, ast.Import) else (
                [n.module] if isinstance(n, ast.ImportFrom) and n.module and n.level == 0 else [])
            for name in names:
                top = name.split(".")[0]
                assert top in allowed or (NODE_DIR / f"{top}.py").exists(), f"{path.name} imports {name}"
    proc = subprocess.run([sys.executable, "-I", "-S", str(NODE_DIR / "health.py"), "--help"],
                          capture_output=True, text=True, cwd="/")
    assert proc.returncode == 0 and "--slurm" in proc.stdout


def test_lost_shared_mount_drains_with_its_path(node, capsys):
    """A spec mount (shared_mounts) that is a plain directory now: the node is drained with
    "corral: /home not mounted"; the probe never writes there (root may be squashed on NFS)."""
    home = node["tmp"] / "home"
    home.mkdir()
    node["cfg"]["shared_mounts"] = {str(home): False}
    node["conf"].write_text(json.dumps(node["cfg"]))
    rc, out = run(node, capsys, "--slurm")
    assert rc == 1 and checks(out)["mounts"] == ("FAIL", f"{home} not mounted")
    assert scontrol_calls(node) == [f"update nodename=gpu01 state=drain reason=corral: {home} not mounted"]
    assert list(home.iterdir()) == []


@pytest.mark.parametrize(("mode", "writable"), [("2", True), ("3", True)])
def test_shared_mount_probe_reads_the_mount_flags(tmp_path, mode, writable):
    argv = [sys.executable, "-I", "-S", "-c", C.FS_PROBE, "/", mode]
    r = C.fs_results(C.run_probes([C.Probe("path:x", argv)], time.monotonic() + 10))["x"]
    assert r["ismount"] is True and r["writable"] is writable
    ro = [line.split()[4] for line in open("/proc/self/mountinfo") if " ro," in f" {line.split()[5]},"]
    if ro:  # a read-only mount of this machine, e.g. /sys/fs/cgroup in a container: mode 2 fails it, 3 not
        argv[-2:] = [ro[0], mode]
        r = C.fs_results(C.run_probes([C.Probe("path:x", argv)], time.monotonic() + 10))["x"]
        assert r["writable"] is (mode == "3") and (mode == "3" or r["write_error"] == "mounted read-only")
