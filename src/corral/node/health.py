#!/usr/bin/python3
"""corral-health: the node health check (Slurm HealthCheckProgram and on demand). Stdlib only.

    python3 health.py [--config FILE] [--json] [--act | --slurm] [--clear-xid] [--timeout S]

Checks GPU count, Xid errors in the kernel log, ECC / retired pages / row remapping, GPU temperature,
mounts, services and free space; every probe is bounded and the whole run ends within timeout_s.
With --act (--slurm = --act, as slurmd runs it) a FAIL drains the node with the reason
"corral: <first failing check's message>", and a healthy node that corral drained is resumed; a node
drained or downed for any other reason is left alone. Exit: 0 healthy, 1 a check failed, 2 bad config.
Installed on nodes as /usr/local/lib/corral/{health,health_checks,health_parse,health_xid,health_slurm}.py.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import tempfile
import time

try:
    from . import health_checks as C
    from . import health_slurm as S
except ImportError:  # run as a script on a node: the modules sit side by side
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import health_checks as C  # type: ignore[no-redef]
    import health_slurm as S  # type: ignore[no-redef]

P = C.P
X = C.X
DEFAULT_CONFIG = "/etc/corral/health.json"
BOOT_ID_FILE = "/proc/sys/kernel/random/boot_id"
DEFAULTS = {"node": None, "expected_gpus": 0, "gpu_model": None, "max_gpu_temp_c": 85, "mounts": ["/"],
            "services": [], "min_free_mb": {}, "timeout_s": 30,
            "state_file": "/var/lib/corral/health-state.json", "test_hang_probe": False,
            "xid_ignore": sorted(P.APPLICATION_XIDS), "dev_dir": "/dev", "metrics_file": None,
            "expected_mig": None, "shared_mounts": {}}
TYPES = {"node": (str, type(None)), "expected_gpus": int, "gpu_model": (str, type(None)),
         "max_gpu_temp_c": (int, float, type(None)), "mounts": list, "services": list, "min_free_mb": dict,
         "timeout_s": (int, float), "state_file": str, "test_hang_probe": bool, "xid_ignore": list,
         "dev_dir": str, "metrics_file": (str, type(None)), "expected_mig": (dict, type(None)),
         "shared_mounts": dict}


class ConfigError(Exception):
    pass


def load_config(path: str) -> dict:
    try:
        with open(path) as f:
            raw = json.load(f)
    except OSError as e:
        raise ConfigError(f"cannot read {path}: {e.strerror}") from None
    except ValueError as e:
        raise ConfigError(f"{path} is not JSON: {e}") from None
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: expected a JSON object")
    for key in sorted(set(raw) - set(DEFAULTS)):
        print(f"corral-health: {path}: ignoring unknown key {key!r}", file=sys.stderr)
    cfg = {**DEFAULTS, **{k: v for k, v in raw.items() if k in DEFAULTS}}
    for key, types in TYPES.items():
        if not isinstance(cfg[key], types) or (key == "expected_gpus" and cfg[key] < 0):
            raise ConfigError(f"{path}: bad value for {key}: {cfg[key]!r}")
    lists = {"mounts": str, "services": str, "xid_ignore": int}
    for key, kind in lists.items():
        if not all(isinstance(v, kind) and not isinstance(v, bool) for v in cfg[key]):
            raise ConfigError(f"{path}: {key} must be a list of {kind.__name__}s")
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in cfg["min_free_mb"].values()):
        raise ConfigError(f"{path}: min_free_mb must map paths to numbers of MB")
    if not all(isinstance(v, bool) for v in cfg["shared_mounts"].values()):
        raise ConfigError(f"{path}: shared_mounts must map paths to true/false (read-only allowed)")
    if cfg["timeout_s"] <= 0:
        raise ConfigError(f"{path}: timeout_s must be > 0")
    cfg["node"] = cfg["node"] or os.environ.get("SLURMD_NODENAME") or socket.gethostname().split(".")[0]
    return cfg


def read_first(path: str, prefix: str = "") -> str:
    try:
        with open(path) as f:
            for line in f:
                if line.startswith(prefix):
                    return line[len(prefix):].strip()
    except OSError:
        pass
    return ""


def load_state(path: str) -> dict:
    try:
        with open(path) as f:
            state = json.load(f)
        return state if isinstance(state, dict) else {}
    except (OSError, ValueError):
        return {}


def save_state(path: str, state: dict) -> str:
    """Write atomically; '' on success, else why not (the run goes on)."""
    try:
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path) or ".", prefix=".health-state-")
        with os.fdopen(fd, "w") as f:
            json.dump(state, f, indent=1)
        os.replace(tmp, path)
        return ""
    except OSError as e:
        return f"state not saved ({path}: {e.strerror})"


def run_checks(cfg: dict, deadline: float, clear_xid: bool = False) -> tuple[list[tuple], str, int | None]:
    """Run every check once -> ([(name, status, message, detail)], note about the state file,
    GPUs found or None when unknown)."""
    env = C.probe_env()
    state = load_state(cfg["state_file"])
    boot_id = read_first(BOOT_ID_FILE)
    same_boot = bool(boot_id) and state.get("boot_id") == boot_id
    since = state.get("last_run") if same_boot else None
    sticky = [] if clear_xid or not same_boot else list(state.get("xid_sticky", []))
    started = time.time()
    probes, ctx = C.plan(cfg, env, since)
    ctx["boot_epoch"] = float(read_first("/proc/stat", "btime ") or 0) or None
    got = C.run_probes(probes, deadline, env)
    results: list[tuple] = []
    if ctx["gpus"]:
        results.append(("gpu_count",) + C.check_gpu_count(cfg, ctx, got.get("gpu-query")))
        ecc = got.get("gpu-ecc")  # the GPUs this node has had: what makes a missing one evidence
        known = set(state.get("gpus_seen", [])) | X.listed(ecc.out if ecc and not ecc.failure() else None)
        status, msg, kept, read_ok = C.check_xid(got, ctx, since, sticky, set(cfg["xid_ignore"]), known)
        results.append(("gpu_xid", status, msg, f"read with {ctx['log']}" if ctx["log"] else ""))
        results.append(("gpu_ecc",) + C.check_gpu_ecc(got.get("gpu-ecc")) + ("",))
        results.append(("gpu_temp",) + C.check_gpu_temp(cfg, got.get("gpu-temp")) + ("",))
        if cfg["expected_mig"] is not None:
            results.append(("gpu_mig",) + C.check_mig(cfg, got.get("gpu-list")) + ("",))
        grew = sorted(known) != state.get("gpus_seen", [])
        state.update(boot_id=boot_id, xid_sticky=kept, last_run=started if read_ok else since, gpus_seen=sorted(known))
        note = save_state(cfg["state_file"], state) if (read_ok or kept != sticky or clear_xid or grew) else ""
    else:
        why = "no GPUs expected (expected_gpus 0) and no /dev/nvidiaN"
        results += [(n, P.SKIPPED, why, "") for n in ("gpu_count", "gpu_xid", "gpu_ecc", "gpu_temp")]
        ctx["gpus_found"] = 0
        note = ""
    fs = C.fs_results(got)
    mounts = list(dict.fromkeys(list(cfg["shared_mounts"]) + list(cfg["mounts"])))
    results.append(("mounts",) + (P.check_mounts(mounts, fs) if mounts
                                  else (P.SKIPPED, "no mounts configured")) + ("",))
    results.append(("services",) + C.check_services(cfg, got.get("services")) + ("",))
    results.append(("free_space",) + (P.check_free_space(cfg["min_free_mb"], fs) if cfg["min_free_mb"]
                                      else (P.SKIPPED, "no free-space limits configured")) + ("",))
    if "test-hang" in got:
        p = got["test-hang"]
        results.append(("test_hang", P.FAIL, p.failure() or "test hang probe ended by itself", "test hook"))
    return results, note, ctx.get("gpus_found")


def act(node: str, results: list[tuple], deadline: float) -> tuple[str, str]:
    """Drain or resume through scontrol -> (action, detail): drained, resumed, none or error."""
    env = C.probe_env()
    scontrol = C.which("scontrol", env)
    if not scontrol:
        return "error", "scontrol not found"
    show = C.run_probes([C.Probe("scontrol-show", [scontrol, "show", "node", "-o", node], 10)], deadline, env)
    p = show["scontrol-show"]
    info = S.parse_scontrol_node(p.out) if not p.timed_out else None
    if info is None:
        return "error", p.failure() or f"node {node} not found by scontrol: {p.out.strip()[:120]}"
    action, reason, why = S.decide(info, [r[:3] for r in results])
    if action == S.NONE:
        return "none", why
    argv = [scontrol, "update", f"nodename={node}"]
    argv += ["state=drain", f"reason={reason}"] if action == S.DRAIN else ["state=resume"]
    upd = C.run_probes([C.Probe("scontrol-update", argv, 10)], deadline, env)["scontrol-update"]
    if upd.failure():
        return "error", f"{action} failed: {upd.failure()}"
    done = "drained" if action == S.DRAIN else "resumed"
    detail = f"{reason} ({why})" if reason else why
    try:
        import syslog
        syslog.openlog("corral-health")
        syslog.syslog(syslog.LOG_WARNING, f"{done} {node}: {detail}")
    except (ImportError, OSError):
        pass
    return done, detail


def parse_args(argv):
    ap = argparse.ArgumentParser(prog="corral-health", description=__doc__.split("\n\n")[0])
    ap.add_argument("--config", default=DEFAULT_CONFIG, help=f"JSON config (default {DEFAULT_CONFIG})")
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    ap.add_argument("--act", action="store_true",
                    help="drain on failure / resume corral's drain when healthy")
    ap.add_argument("--slurm", action="store_true",
                    help="as run by slurmd (HealthCheckProgram): implies --act")
    ap.add_argument("--clear-xid", action="store_true",
                    help="forget fatal Xids kept from earlier runs (after a GPU reset)")
    ap.add_argument("--timeout", type=float,
                    help="bound on the whole run in seconds (default: config timeout_s)")
    return ap.parse_args(argv)


STATUS_VALUE = {P.OK: 0, P.SKIPPED: 0, P.WARN: 1, P.FAIL: 2}


def metrics_text(results: list[tuple], gpus_found: int | None) -> str:
    """node-exporter textfile: each check's status (0 ok/skipped, 1 warn, 2 fail), GPUs found."""
    out = ["# HELP corral_health_status corral-health check status (0 ok or skipped, 1 warn, 2 fail)",
           "# TYPE corral_health_status gauge"]
    out += [f'corral_health_status{{check="{n}"}} {STATUS_VALUE.get(s, 2)}' for n, s, _m, _d in results]
    if gpus_found is not None:
        out += ["# HELP corral_node_gpus_found GPUs corral-health found on this node",
                "# TYPE corral_node_gpus_found gauge", f"corral_node_gpus_found {gpus_found}"]
    return "\n".join(out) + "\n"


def write_metrics(path: str, text: str) -> str:
    """Atomically (node-exporter may read it at any time); a failure is a note, never fatal."""
    try:
        fd, tmp = tempfile.mkstemp(prefix=".corral-health.", dir=os.path.dirname(path))
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
        return ""
    except OSError as e:
        return f"metrics not written ({path}: {e.strerror})"


def main(argv=None) -> int:
    args = parse_args(argv)
    start = time.monotonic()
    try:
        cfg = load_config(args.config)
    except ConfigError as e:
        print(f"corral-health: {e}", file=sys.stderr)
        return 2
    timeout = args.timeout or cfg["timeout_s"]
    acting = args.act or args.slurm
    reserve = min(8.0, timeout * 0.3) if acting else 0.0
    results, note, gpus_found = run_checks(cfg, start + timeout - reserve - 0.2, clear_xid=args.clear_xid)
    if cfg["metrics_file"]:
        written = write_metrics(cfg["metrics_file"], metrics_text(results, gpus_found))
        note = "; ".join(x for x in (note, written) if x)
    ok = not any(r[1] == P.FAIL for r in results)
    action, detail = "none", "not requested (--act)"
    if acting:
        action, detail = act(cfg["node"], results, start + timeout - 0.1)
    if args.json:
        checks = [dict({"name": n, "status": s, "message": m}, **({"detail": d} if d else {}))
                  for n, s, m, d in results]
        print(json.dumps({"node": cfg["node"], "ok": ok, "checks": checks, "action": action,
                          "action_detail": detail, **({"note": note} if note else {}),
                          "duration_s": round(time.monotonic() - start, 2)}))
    else:
        for n, s, m, d in results:
            print(f"{s:<7} {n:<10} {m}" + (f" ({d})" if d else ""))
        if note:
            print(f"note: {note}")
        if acting:
            print(f"action: {action}: {detail}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
