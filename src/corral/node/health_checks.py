"""corral-health's probes and checks (stdlib only, runs on nodes).

Every probe is a subprocess in its own process group, started all at once and each bounded by the
run's deadline: a hung probe (nvidia-smi on a wedged GPU, a stat() on a dead NFS mount) has its group
killed and is reported as a FAIL "probe X timed out after N s"; nothing waits on it past the deadline.
Filesystem checks run in a child Python for that reason. The parsers are in health_parse.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time

try:
    from . import health_parse as P
    from . import health_xid as X
except ImportError:  # run as a script on a node: the modules sit side by side
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import health_parse as P  # type: ignore[no-redef]
    import health_xid as X  # type: ignore[no-redef]

OK, WARN, FAIL, SKIPPED = P.OK, P.WARN, P.FAIL, P.SKIPPED

# Probe for one path, in a child so that a hung filesystem cannot hang the checker. Args: PATH MODE:
# 0 read only; 1 write a temp file; 2 a shared mount (root may be squashed there): mounted read-write;
# 3 a shared mount that may be read-only.
FS_PROBE = r"""
import json, os, sys, tempfile
p, mode = sys.argv[1], sys.argv[2]
r = {"exists": os.path.isdir(p)}
if r["exists"]:
    r["ismount"] = os.path.ismount(p)
    st = os.statvfs(p)
    r["free_mb"] = st.f_bavail * st.f_frsize // 1048576
    if mode in ("2", "3"):
        r["writable"] = mode == "3" or not st.f_flag & os.ST_RDONLY
        if not r["writable"]:
            r["write_error"] = "mounted read-only"
    elif mode == "1":
        try:
            fd, name = tempfile.mkstemp(dir=p, prefix=".corral-health-")
            os.close(fd)
            os.unlink(name)
            r["writable"] = True
        except OSError as e:
            r["writable"], r["write_error"] = False, e.strerror or str(e)
print(json.dumps(r))
"""

KMSG = "/dev/kmsg"
# The kernel's records, one per read(), control characters escaped by the kernel; records already
# overwritten in the ring give EPIPE (skipped). Non-blocking: the end of the ring is EAGAIN.
KMSG_PROBE = r"""
import errno, os, sys
fd = os.open(sys.argv[1], os.O_RDONLY | os.O_NONBLOCK)
while True:
    try:
        rec = os.read(fd, 65536)
    except OSError as e:
        if e.errno == errno.EPIPE:
            continue
        if e.errno == errno.EAGAIN:
            break
        raise
    if not rec:
        break
    sys.stdout.buffer.write(rec)
"""


def fmt_s(seconds: float) -> str:
    return f"{round(seconds, 1):g}"


class Probe:
    """One command: after run_probes, rc/out/err, or timed_out, or error (could not start)."""

    def __init__(self, name: str, argv: list[str], timeout: float = 20.0):
        self.name, self.argv, self.timeout = name, argv, timeout
        self.rc: int | None = None
        self.out = self.err = ""
        self.timed_out, self.error, self.pid, self.budget = False, "", None, 0.0

    def failure(self) -> str:
        """Why this probe gave no usable output ('' when it ran and exited 0)."""
        if self.timed_out:
            return f"probe {self.name} timed out after {fmt_s(self.budget)} s"
        if self.error:
            return self.error
        if self.rc != 0:
            text = (self.err.strip() or self.out.strip() or "no output").splitlines()[0]
            return f"{self.argv[0].rsplit('/', 1)[-1]} exited {self.rc}: {text[:120]}"
        return ""


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _run_one(p: Probe, deadline: float, env: dict | None) -> None:
    p.budget = max(0.05, min(p.timeout, deadline - time.monotonic()))
    try:
        proc = subprocess.Popen(p.argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, env=env, start_new_session=True,
                                text=True, errors="replace")
    except OSError as e:
        p.error = f"cannot run {p.argv[0]}: {e.strerror or e}"
        return
    p.pid = proc.pid
    try:
        p.out, p.err = proc.communicate(timeout=p.budget)
        p.rc = proc.returncode
    except subprocess.TimeoutExpired:
        p.timed_out = True
        _kill_group(proc.pid)
        try:  # reap it; a process stuck in the kernel (D state) is left behind, not waited for
            proc.communicate(timeout=1)
        except subprocess.TimeoutExpired:
            pass


def run_probes(probes: list[Probe], deadline: float, env: dict | None = None) -> dict[str, Probe]:
    """Run all probes at once; return by name when each has exited or been killed at `deadline`."""
    threads = [threading.Thread(target=_run_one, args=(p, deadline, env), daemon=True) for p in probes]
    for t in threads:
        t.start()
    for p, t in zip(probes, threads):
        t.join(max(0.0, deadline - time.monotonic()) + 2.0)
        if t.is_alive():  # cannot happen short of a stuck communicate(); report, do not wait
            p.timed_out = True
    return {p.name: p for p in probes}


def probe_env() -> dict:
    env = dict(os.environ, LC_ALL="C", SYSTEMD_COLORS="0", SYSTEMD_PAGER="cat")
    path = env.get("PATH", "")
    extra = [d for d in ("/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin")
             if d not in path.split(":")]
    env["PATH"] = ":".join([path] + extra if path else extra)
    return env


def which(name: str, env: dict) -> str | None:
    return shutil.which(name, path=env.get("PATH"))


def gpu_device_count(dev_dir: str) -> int:
    try:
        return P.count_gpu_device_files(os.listdir(dev_dir))
    except OSError:
        return 0


def plan(cfg: dict, env: dict, since: float | None) -> tuple[list[Probe], dict]:
    """Which probes this node needs, and what the checks need to know about how they were chosen."""
    ctx = {"devs": gpu_device_count(cfg["dev_dir"]), "smi": which("nvidia-smi", env), "log": None}
    ctx["gpus"] = cfg["expected_gpus"] > 0 or ctx["devs"] > 0
    probes: list[Probe] = []
    # slurmd runs the program with no PATH at all, and then Python cannot name its own executable
    python = sys.executable or which("python3", env) or "/usr/bin/python3"
    if ctx["gpus"] and ctx["smi"]:
        q = [ctx["smi"], "--format=csv,noheader,nounits"]
        probes += [Probe("gpu-query", q + ["--query-gpu=index,name,memory.total"]),
                   Probe("gpu-temp", q + ["--query-gpu=index,temperature.gpu"]),
                   Probe("gpu-ecc", [ctx["smi"], "-q", "-d", "ECC,PAGE_RETIREMENT,ROW_REMAPPER"])]
        if cfg["expected_mig"] is not None:
            probes.append(Probe("gpu-list", [ctx["smi"], "-L"]))
    if ctx["gpus"]:  # the kernel log as records (health_xid says why never as text lines)
        if journalctl := which("journalctl", env):
            argv = [journalctl, "-k", "-o", "json", "--output-fields=MESSAGE,SYSLOG_FACILITY,_TRANSPORT",
                    "--no-pager", "-q"]
            probes.append(Probe("kernel-log", argv + (["--since", f"@{int(since)}"] if since else []), 15))
            ctx["log"] = "journalctl"
        elif os.path.exists(KMSG):
            probes.append(Probe("kernel-log", [python, "-I", "-S", "-c", KMSG_PROBE, KMSG], 15))
            ctx["log"] = KMSG
    if cfg["services"] and (systemctl := which("systemctl", env)):
        probes.append(Probe("services", [systemctl, "is-active"] + list(cfg["services"]), 10))
    writable, shared = set(cfg["mounts"]), cfg["shared_mounts"]
    for path in dict.fromkeys(list(shared) + list(cfg["mounts"]) + list(cfg["min_free_mb"])):
        mode = ("3" if shared[path] else "2") if path in shared else "1" if path in writable else "0"
        argv = [python, "-I", "-S", "-c", FS_PROBE, path, mode]
        probes.append(Probe(f"path:{path}", argv, 10))
    if cfg["test_hang_probe"]:
        probes.append(Probe("test-hang", ["sleep", "3600"], 3600))
    return probes, ctx


def check_gpu_count(cfg: dict, ctx: dict, p: Probe | None) -> tuple[str, str, str]:
    expected, devs = cfg["expected_gpus"], ctx["devs"]
    if p is None:
        count, smi, gpus = devs, "not found", []
    elif p.failure():
        if p.timed_out:
            return FAIL, p.failure(), f"devices {devs}"
        count, smi, gpus = 0, f"failed: {p.failure()}", []
    else:
        gpus = P.parse_gpu_query(p.out)
        count, smi = min(devs, len(gpus)), str(len(gpus))
    detail = f"devices {devs}, nvidia-smi {smi}"
    ctx["gpus_found"] = count
    if count < expected:
        return FAIL, f"gpu count {count} < {expected}", detail
    wrong = [g for g in gpus if not P.model_matches(g["name"], cfg["gpu_model"])]
    if wrong:
        return WARN, f"gpu {wrong[0]['index']} is {wrong[0]['name']}, expected {cfg['gpu_model']}", detail
    if count > expected:
        return WARN, f"gpu count {count} > {expected}", detail
    return OK, f"gpu count {count}", detail


def check_mig(cfg: dict, p: Probe | None) -> tuple[str, str]:
    """The MIG devices nvidia-smi lists, per profile, against the spec's layout."""
    if p is None:
        return SKIPPED, "nvidia-smi not found"
    if p.failure():
        return FAIL, f"nvidia-smi -L: {p.failure()}"
    found, want = P.parse_mig_list(p.out), cfg["expected_mig"]
    if found == want:
        return OK, f"MIG devices {_counts(found) or 'none'}"
    return FAIL, f"MIG devices {_counts(found) or 'none'}, expected {_counts(want) or 'none'}"


def _counts(d: dict[str, int]) -> str:
    return ", ".join(f"{k} x{v}" for k, v in sorted(d.items()))


def check_gpu_temp(cfg: dict, p: Probe | None) -> tuple[str, str]:
    limit = cfg["max_gpu_temp_c"]
    if limit is None:
        return SKIPPED, "no max_gpu_temp_c configured"
    if p is None:
        return SKIPPED, "nvidia-smi not found"
    if p.failure():
        return (FAIL if p.timed_out else WARN), p.failure()
    temps = {i: t for i, t in P.parse_gpu_temps(p.out).items() if t is not None}
    if not temps:
        return SKIPPED, "no GPU temperature reported"
    hot = [f"gpu {i} temperature {t} C > {limit} C" for i, t in sorted(temps.items()) if t > limit]
    return (FAIL, "; ".join(hot)) if hot else (OK, f"max {max(temps.values())} C (limit {limit} C)")


def check_gpu_ecc(p: Probe | None) -> tuple[str, str]:
    if p is None:
        return SKIPPED, "nvidia-smi not found"
    if p.failure():
        return (FAIL if p.timed_out else WARN), p.failure()
    return P.check_ecc(p.out)


def check_xid(got: dict[str, Probe], ctx: dict, since: float | None, sticky: list,
              ignore, known: set[str] = frozenset()) -> tuple[str, str, list, bool]:
    """-> (status, message, sticky', read_ok): read_ok says whether the log was read (advance last_run).
    A fatal Xid is kept past this run only when nvidia-smi corroborates it (health_xid; `known`: the GPUs
    this node has had)."""
    p = got.get("kernel-log")
    if p is None:
        return SKIPPED, "no journalctl or /dev/kmsg to read the kernel log", sticky, False
    unreadable = p.timed_out or bool(p.error) or (p.rc != 0 and bool(p.err.strip()) and not p.out.strip())
    records = (X.parse_journal_json(p.out) if ctx["log"] == "journalctl"
               else X.parse_kmsg(p.out, boot_epoch=ctx.get("boot_epoch")))
    events = X.xid_events(records)
    smi = got.get("gpu-ecc")
    proof = X.evidence(events, smi.out if smi else None, smi.failure() if smi else "", known)
    status, msg, kept = X.xid_verdict(sticky, events, since, ignore, proof)
    if unreadable and status != FAIL:
        return (FAIL if p.timed_out else WARN), f"cannot read the kernel log: {p.failure()}", kept, False
    return status, msg, kept, not unreadable


def fs_results(probes: dict[str, Probe]) -> dict[str, dict]:
    out = {}
    for name, p in probes.items():
        if not name.startswith("path:"):
            continue
        if p.failure():
            out[name[5:]] = {"error": p.failure()}
            continue
        try:
            out[name[5:]] = json.loads(p.out.strip().splitlines()[-1])
        except (ValueError, IndexError):
            out[name[5:]] = {"error": f"probe {name} gave no result"}
    return out


def check_services(cfg: dict, p: Probe | None) -> tuple[str, str]:
    if not cfg["services"]:
        return SKIPPED, "no services configured"
    if p is None:
        return SKIPPED, "systemctl not found"
    if p.timed_out or (p.error and not p.out):
        return FAIL, p.failure()
    return P.check_services(P.parse_is_active(p.out, list(cfg["services"])))
