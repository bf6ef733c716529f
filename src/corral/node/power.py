#!/usr/bin/python3
"""corral-power-suspend / -resume / -resume-fail: Slurm's SuspendProgram, ResumeProgram and
ResumeFailProgram (run by slurmctld as SlurmUser on the controller, with a Slurm hostlist).

suspend/resume: the hostlist expanded (`scontrol show hostnames`), each node's BMC (power.json) asked
through Redfish for GracefulShutdown / On, nodes in parallel, each call bounded. resume-fail: the nodes
drained with the reason `corral: power: resume failed`. Every action and its outcome goes to the log
file (never a credential); the exit status is 1 when a node failed.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

try:
    from .power_redfish import Redfish, RedfishError
except ImportError:  # run as a script on a controller: the modules sit side by side
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from power_redfish import Redfish, RedfishError  # type: ignore[no-redef]

CONFIG = "/etc/corral/power.json"  # paths.POWER_CONFIG
SCONTROL_TIMEOUT_S = 30
MAX_CREDENTIALS_BYTES = 4096
log = logging.getLogger("corral-power")


def expand(hostlist: str, run=subprocess.run) -> list[str]:
    proc = run(["scontrol", "show", "hostnames", hostlist], capture_output=True, text=True,
               timeout=SCONTROL_TIMEOUT_S)
    if proc.returncode != 0:
        raise RuntimeError(f"scontrol show hostnames {hostlist!r} failed: {proc.stderr.strip()[:200]}")
    return proc.stdout.split()


def credentials(path: str) -> tuple[str, str]:
    """`user:password` from the file's first line (bounded); the error never shows the content."""
    with open(path, "rb") as f:
        data = f.read(MAX_CREDENTIALS_BYTES + 1)
    line = data[:MAX_CREDENTIALS_BYTES].decode(errors="replace").splitlines()[0] if data.strip() else ""
    user, sep, password = line.partition(":")
    if len(data) > MAX_CREDENTIALS_BYTES or not sep or not user or not password:
        raise RuntimeError(f"{path}: not `user:password` on the first line")
    return user, password


def _one(config: dict, node: str, on: bool, user: str, password: str) -> bool:
    url = config["nodes"].get(node)
    what = "power on" if on else "power off"
    if url is None:
        log.error("%s %s: no BMC for this node in %s", what, node, CONFIG)
        return False
    try:
        done = Redfish(url, user, password, config.get("timeout_s", 20), config.get("verify_tls", True)).power(node, on)
    except RedfishError as exc:
        log.error("%s %s: failed: %s", what, node, exc)
        return False
    log.info("%s %s: %s (%s)", what, node, done, url)
    return True


def power(config: dict, nodes: list[str], on: bool) -> bool:
    user, password = credentials(config["credentials_file"])
    with ThreadPoolExecutor(max_workers=min(16, max(1, len(nodes)))) as pool:
        return all(pool.map(lambda n: _one(config, n, on, user, password), nodes))


def resume_failed(config: dict, hostlist: str, run=subprocess.run) -> bool:
    reason = config.get("resume_fail_reason", "corral: power: resume failed")
    proc = run(["scontrol", "update", f"NodeName={hostlist}", "State=DRAIN", f"Reason={reason}"],
               capture_output=True, text=True, timeout=SCONTROL_TIMEOUT_S)
    if proc.returncode != 0:
        log.error("resume failed %s: drain failed: %s", hostlist, proc.stderr.strip()[:200])
        return False
    log.warning("resume failed %s: drained (%s)", hostlist, reason)
    return True


def setup_logging(path: str | None) -> None:
    handler: logging.Handler
    try:
        handler = logging.FileHandler(path) if path else logging.StreamHandler(sys.stderr)
    except OSError:
        handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
    for old in list(log.handlers):  # one run, one log file
        log.removeHandler(old)
        old.close()
    log.addHandler(handler)
    log.setLevel(logging.INFO)


def main(argv: list[str] | None = None, run=subprocess.run) -> int:
    args = sys.argv[1:] if argv is None else argv
    config_path = CONFIG
    if len(args) >= 2 and args[0] == "--config":
        config_path, args = args[1], args[2:]
    if len(args) != 2 or args[0] not in ("suspend", "resume", "resume-fail"):
        print("usage: power.py [--config FILE] suspend|resume|resume-fail HOSTLIST", file=sys.stderr)
        return 2
    action, hostlist = args
    try:
        with open(config_path) as f:
            config = json.load(f)
    except (OSError, ValueError) as exc:
        print(f"corral-power: cannot read {config_path}: {exc}", file=sys.stderr)
        return 1
    setup_logging(config.get("log_file"))
    try:
        if action == "resume-fail":
            return 0 if resume_failed(config, hostlist, run) else 1
        nodes = expand(hostlist, run)
        log.info("%s %s", action, ",".join(nodes))
        return 0 if power(config, nodes, action == "resume") else 1
    except (OSError, RuntimeError, subprocess.TimeoutExpired) as exc:
        log.error("%s %s: %s", action, hostlist, exc)
        return 1


if __name__ == "__main__":
    sys.exit(main())
