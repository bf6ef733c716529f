"""Soak: ordinary users submit jobs from the login node, continuously, while corral and the operator do what
operators do: a slurmdbd restart, a driver rollout (drain, reinstall, reboot, verify, resume, node by node),
an HA failover (the primary slurmctld stopped, the backup takes over, hands back), a compute node reboot,
and a kill -9 of slurmctld. Then every job is accounted for.

    .venv/bin/python -m bench.bench_soak [--minutes 5] [--no-kill]

Cluster (bench subnet): ctl (controller, accounting, monitoring, NFS homes), ctl2 (backup controller,
StateSaveLocation on the emulated NAS), gpu01-02, login1; users alice, bob and carol (spec users, homes on
NFS). Each user runs one loop on login1 as themself (runuser): `sbatch` of a 2 s job every ~0.5 s, each
named soak-USER-N, timing each sbatch. Printed: per user and in total, submitted (an ID returned),
refused (sbatch failed: the user saw it), completed and accounted (sacct, by job name), lost (an ID
returned, never accounted), submit latency p50/p95/max; then every lost job with its explanation from
slurmctld's own log (node/ctld_log.py over the primary's and the backup's logs).
"""

from __future__ import annotations

import argparse
import shlex
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from corral.engine import patch_gevent

patch_gevent()

from bench.bench_chaos import until  # noqa: E402
from bench.common import BENCH_SUBNET, table  # noqa: E402
from corral.spec.loader import load  # noqa: E402
from corral.virtual.cluster import VirtualCluster  # noqa: E402
from corral.virtual.defaults import default_spec  # noqa: E402
from corral.virtual.repo import start_server, stop_server  # noqa: E402
from corral.workflows.converge import converge  # noqa: E402
from tests.vcluster.standin import PACKAGE, build_repo  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src" / "corral" / "node"))
import ctld_log  # noqa: E402

NET = str(BENCH_SUBNET.network_address)[:-2]
USERS = {"alice": 2001, "bob": 2002, "carol": 2003}
REPO_PORT = 18089
DRIVER = ('nvidia:\n  driver: {{version: "{v}", package: ' + PACKAGE + '}}\n'
          'rollout: {{canary: 1, batch: 1, drain_timeout: 60, reboot_timeout: 180}}\n')
LOOP = """i=0; while [ ! -e /tmp/soak-stop ]; do i=$((i+1)); s=$(date +%s%N)
id=$(sbatch --parsable -A research -t 1 -J soak-$USER-$i -o /dev/null --wrap 'sleep 2' 2>/tmp/soak-$USER.err); rc=$?
e=$(date +%s%N); echo "$i $s $e $rc ${id:-none}" >> /tmp/soak-$USER.txt; sleep 0.5; done"""


def spec(key: str) -> str:
    text = default_spec("soak", 2, 4, "h100", BENCH_SUBNET, "corralbench0", 18088, usable=True, user_key=key)
    ctl = "    roles: [controller, accounting, monitoring, nfs]\n"
    assert ctl in text
    text = text.replace(ctl, ctl + f"  - {{names: ctl2, addresses: [{NET}.9], roles: [controller]}}\n", 1)
    text = text.replace("slurm:\n", "slurm:\n  state_save_location: /srv/slurmctld-state\n  slurmctld_timeout_s: 10\n", 1)
    text = text.replace("  mounts:\n", "  mounts:\n    - {path: /srv/slurmctld-state, server: nas1, "
                        "export: /export/slurmstate, roles: [controller]}\n", 1)
    extra = "".join(f"  - {{name: {u}, uid: {uid}, accounts: [research]}}\n" for u, uid in USERS.items() if u != "alice")
    return text.replace("virtual:\n", extra + "virtual:\n", 1)


def sh(vc, node: str, command: str, check: bool = True, timeout: float = 120) -> str:
    proc = subprocess.run(vc.ssh_cmd(vc.node(node).node.address, "sh", "-c", shlex.quote(command)),
                          capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=timeout)
    if check and proc.returncode != 0:
        raise RuntimeError(f"{node}: {command[:80]}: {proc.stderr.strip()}")
    return proc.stdout


def apply(vc, base: str, version: str, label: str) -> None:
    vc.cluster.path.write_text(base + DRIVER.format(v=version))
    result = converge(load(vc.cluster.path), "apply", command=label)
    if not result.ok:
        raise RuntimeError(f"{label} failed: {[(n, r.error) for n, r in result.nodes.items() if r.error]}")


def faults(vc, base: str, kill: bool, log: list, origin: float) -> None:
    """The operator's hour, compressed: each fault, its start and how long it took."""
    def step(name: str, fn) -> None:
        t0 = time.monotonic()
        fn()
        log.append((name, t0 - origin, time.monotonic() - t0))
        print(f"fault done: {name} at +{t0 - origin:.0f} s, took {time.monotonic() - t0:.1f} s", flush=True)
    time.sleep(20)
    step("slurmdbd restart", lambda: sh(vc, "ctl", "systemctl restart slurmdbd"))
    time.sleep(10)
    step("driver rollout 1.0 -> 1.1 (2 nodes, canary 1, batch 1)", lambda: apply(vc, base, "1.1", "soak-rollout"))
    time.sleep(10)

    def failover():
        sh(vc, "ctl", "systemctl stop slurmctld")
        # the backup serves (answers an RPC only the controller in charge answers) once the primary is down
        until(lambda: "at ctl is DOWN" in (out := sh(vc, "ctl2", "scontrol ping; scontrol show partition >/dev/null "
                                                   "&& echo SERVED", check=False)) and "SERVED" in out, 60)
        time.sleep(15)
        sh(vc, "ctl", "systemctl start slurmctld")
        until(lambda: "Slurmctld(primary) at ctl is UP" in sh(vc, "ctl", "scontrol ping", check=False), 120)
    step("HA failover: primary stopped 15 s past takeover, then back", failover)
    time.sleep(10)

    def reboot():
        sh(vc, "gpu02", "systemctl reboot", check=False)
        time.sleep(3)
        until(lambda: sh(vc, "ctl", "sinfo -h -n gpu02 -o %T").strip() in ("idle", "mixed", "allocated"), 180)
    step("gpu02 rebooted", reboot)
    if kill:
        time.sleep(10)
        step("slurmctld kill -9 on ctl", lambda: sh(vc, "ctl", "kill -9 $(systemctl show -p MainPID --value slurmctld)"))


def collect(vc) -> tuple[dict, dict]:
    subs: dict[str, list] = {}
    for user in USERS:
        rows = []
        for line in sh(vc, "login1", f"cat /tmp/soak-{user}.txt").splitlines():
            i, s, e, rc, job = line.split()
            rows.append({"name": f"soak-{user}-{i}", "t": int(s) / 1e9, "latency": (int(e) - int(s)) / 1e9,
                         "rc": int(rc), "id": job if job.isdigit() else None})
        subs[user] = rows
    acct = {}
    for line in sh(vc, "ctl", "sacct -a -X -n -P -S now-2hours -o JobID,JobName,State").splitlines():
        job, name, state = line.split("|")[:3]
        if name.startswith("soak-"):
            acct.setdefault(name, []).append((job, state))
    return subs, acct


def explain(vc, lost: list[dict]) -> list[str]:
    """Each lost job against the judge's verdicts on every restart in both controllers' logs."""
    verdicts = []
    for node in ("ctl", "ctl2"):
        lines = sh(vc, node, "cat /var/log/slurm/slurmctld.log.1 /var/log/slurm/slurmctld.log 2>/dev/null",
                   check=False).splitlines()
        starts = [i for i, line in enumerate(lines) if "started on cluster" in line]
        for k, at in enumerate(starts[1:], 1):
            end = starts[k + 1] if k + 1 < len(starts) else len(lines)
            r = ctld_log.last_restart("\n".join(lines[:end]))
            verdicts.append((node, r))
    out = []
    for job in lost:
        why = next((f"lost by the unclean restart of slurmctld on {node} at {r.at} (named by corral's judge)"
                    for node, r in verdicts if job["id"] in r.lost), "NOT EXPLAINED by slurmctld's log")
        out.append(f"{job['name']} (ID {job['id']}, acknowledged at +{job['rel']:.1f} s): {why}")
    return out


def pct(xs: list[float], q: float) -> float:
    return statistics.quantiles(xs, n=100)[int(q) - 1] if len(xs) > 1 else (xs[0] if xs else 0.0)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--minutes", type=float, default=5)
    ap.add_argument("--no-kill", action="store_true", help="leave out the kill -9 of slurmctld")
    args = ap.parse_args()
    gateway = str(BENCH_SUBNET.network_address + 1)
    with tempfile.TemporaryDirectory(prefix="corral-soak-") as d:
        from corral.virtual.keys import ensure_key, user_key_file
        work = Path(d)
        key = ensure_key(user_key_file(work / ".corral", "alice"), "alice@soak")
        path = work / "cluster.yaml"
        path.write_text(spec(key))
        base = path.read_text()
        repo = build_repo(work / "repo", {"1.0": False, "1.1": False})
        vc, server = VirtualCluster(load(path)), None
        try:
            vc.up()
            server = start_server(repo, gateway, REPO_PORT, work / "repo.log")  # on the bridge: after it is up
            for n in ("gpu01", "gpu02"):
                sh(vc, n, f"echo 'deb [trusted=yes] http://{gateway}:{REPO_PORT} ./' > /etc/apt/sources.list.d/corral-test.list")
            apply(vc, base, "1.0", "soak-setup")
            sh(vc, "login1", "rm -f /tmp/soak-*")
            loop = shlex.quote(LOOP)
            for user in USERS:
                sh(vc, "login1", f"nohup runuser -u {user} -- bash -c {loop} >/dev/null 2>&1 &")
            t0, origin = time.time(), time.monotonic()
            log: list = []
            errors: list = []

            def run_faults():
                try:
                    faults(vc, base, not args.no_kill, log, origin)
                except Exception as e:  # noqa: BLE001 - reported with the table
                    errors.append(repr(e))
            worker = threading.Thread(target=run_faults)
            worker.start()
            time.sleep(args.minutes * 60)
            worker.join()
            sh(vc, "login1", "touch /tmp/soak-stop")
            soak_s = time.time() - t0
            time.sleep(3)
            try:
                until(lambda: not sh(vc, "ctl", "squeue -h -o %j | grep -c ^soak- || true").strip().strip("0"), 240)
            except RuntimeError:
                print("queue not drained within 240 s; what is left, and why:")
                print(sh(vc, "ctl", "squeue -h -o '%i %j %T %R' | grep soak- | head -20", check=False))
            print("nodes drained or down after the soak (sinfo -R):")
            print(sh(vc, "ctl", "sinfo -R", check=False))
            time.sleep(5)
            subs, acct = collect(vc)
            queued = set(sh(vc, "ctl", "squeue -h -o %j", check=False).split())
            rows, lost_all, lat_all = [], [], []
            for user, mine in subs.items():
                acked = [s for s in mine if s["rc"] == 0 and s["id"]]
                refused = len(mine) - len(acked)
                completed = sum(1 for s in acked if any(st == "COMPLETED" for _, st in acct.get(s["name"], [])))
                accounted = sum(1 for s in acked if s["name"] in acct)
                lost = [dict(s, rel=s["t"] - t0) for s in acked if s["name"] not in acct and s["name"] not in queued]
                lat = [s["latency"] for s in mine]
                lat_all += lat
                lost_all += lost
                rows.append([user, len(acked), refused, completed, len(lost), accounted, f"{pct(lat, 50):.3f}",
                             f"{pct(lat, 95):.3f}", f"{max(lat):.2f}"])
            tot = [sum(r[i] for r in rows) for i in range(1, 6)]
            rows.append(["all", *tot, f"{pct(lat_all, 50):.3f}", f"{pct(lat_all, 95):.3f}", f"{max(lat_all):.2f}"])
            print(table(f"soak: {len(USERS)} users, {soak_s / 60:.1f} min, submissions from login1",
                        ["user", "submitted", "refused", "completed", "lost", "accounted", "submit p50 s",
                         "submit p95 s", "max s"], rows))
            print(table("faults, in order", ["fault", "at (s)", "took (s)"],
                        [[n, f"{t:.0f}", f"{dt:.1f}"] for n, t, dt in log]))
            for line in explain(vc, lost_all):
                print("lost:", line)
            if errors:
                print("fault sequence error:", *errors)
        finally:
            vc.down()
            if server is not None:
                stop_server(server)


if __name__ == "__main__":
    main()
