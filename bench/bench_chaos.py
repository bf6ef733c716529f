"""Faults injected into a deployed virtual cluster; time to recover, jobs lost, validate's verdict time.

Run as root: .venv/bin/python -m bench.bench_chaos [--runs 1]
One cluster (ctl + gpu01-02, and ctl2 as a backup controller with the state on the emulated NAS) is
deployed once; each fault is injected, measured and repaired in turn. Jobs lost counts held jobs
queued at least 10 s (past slurmctld's state save) before the fault that are gone after it.
Figures are medians over --runs; this machine is shared and noisy.
"""

from __future__ import annotations

import argparse
import subprocess
import tempfile
import threading
import time
from pathlib import Path

from corral.engine import patch_gevent

patch_gevent()

from bench.common import BENCH_SUBNET, median, table  # noqa: E402
from corral.backup.restore import restore  # noqa: E402
from corral.backup.take import take  # noqa: E402
from corral.checks.validate import validate  # noqa: E402
from corral.spec.loader import load  # noqa: E402
from corral.virtual.cluster import VirtualCluster  # noqa: E402
from corral.virtual.defaults import default_spec  # noqa: E402
from corral.workflows.converge import converge  # noqa: E402

NET = str(BENCH_SUBNET.network_address)[:-2]
TAKEOVER_S = 10


def ha_spec(text: str) -> str:
    """The default virtual spec plus ctl2, a backup controller, with slurmctld's state on the emulated NAS."""
    ctl = "    roles: [controller, accounting, monitoring]\n"
    assert ctl in text and "slurm:\n" in text
    text = text.replace(ctl, ctl + f"  - {{names: ctl2, addresses: [{NET}.9], roles: [controller]}}\n", 1)
    text = text.replace("slurm:\n", f"slurm:\n  state_save_location: /srv/slurmctld-state\n"
                                     f"  slurmctld_timeout_s: {TAKEOVER_S}\n", 1)
    return text + ("storage:\n  mounts:\n    - {path: /srv/slurmctld-state, server: nas1, export: /export/slurmstate, "
                   "roles: [controller]}\n")


def sh(vc, node: str, command: str, check: bool = True) -> str:
    proc = subprocess.run(vc.ssh_cmd(vc.node(node).node.address, command), capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, timeout=120)
    if check and proc.returncode != 0:
        raise RuntimeError(f"{node}: {command}: {proc.stderr.strip()}")
    return proc.stdout


def until(probe, timeout: float = 180, every: float = 0.5) -> float:
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        try:
            if probe():
                return time.monotonic() - start
        except (RuntimeError, subprocess.TimeoutExpired):
            pass
        time.sleep(every)
    raise RuntimeError(f"not recovered within {timeout} s")


def hold_jobs(vc, n: int = 3) -> list[str]:
    jobs = [sh(vc, "ctl", "sbatch --parsable --hold -A research --wrap 'sleep 600'").strip() for _ in range(n)]
    time.sleep(10)  # past the state save
    return jobs


def lost(vc, jobs: list[str]) -> int:
    queued = set(sh(vc, "ctl", "squeue -h -o %i", check=False).split())
    sh(vc, "ctl", f"scancel {' '.join(jobs)}", check=False)
    return len([j for j in jobs if j not in queued])


def ping_up(vc) -> bool:
    return "is UP" in sh(vc, "ctl", "scontrol ping", check=False)


def in_sacct(vc, job: str) -> bool:
    return sh(vc, "ctl", f"sacct -n -X -P -j {job} -o State", check=False).strip() == "COMPLETED"


def node_down_mid_apply(vc) -> dict:
    for n in ("ctl", "gpu01", "gpu02"):  # drift on every node that takes apply some seconds to put back
        sh(vc, n, "rm -f /etc/corral/health.json; DEBIAN_FRONTEND=noninteractive apt-get purge -y -q "
                  "prometheus-node-exporter >/dev/null 2>&1")
    holder = {}
    t = threading.Thread(target=lambda: holder.update(r=converge(vc.cluster, "apply", command="chaos")))
    start = time.monotonic()
    t.start()
    time.sleep(3.0)  # connected and installing
    vc.node("gpu02").stop()
    t.join()
    verdict = time.monotonic() - start
    r = holder["r"]
    ok = not r.nodes["gpu02"].ok and r.nodes["ctl"].ok and r.nodes["gpu01"].ok
    start = time.monotonic()
    vc.up()
    assert converge(vc.cluster, "apply", command="chaos-repair").ok
    until(lambda: "idle" in sh(vc, "ctl", "sinfo -h -n gpu02 -o %T"))
    return {"recover": time.monotonic() - start, "lost": "-", "verdict": verdict,
            "note": "apply: gpu02 failed alone" if ok else "apply verdict wrong"}


def slurmd_dead_during_validate(vc) -> dict:
    sh(vc, "gpu02", "systemctl stop slurmd")
    start = time.monotonic()
    report = validate(vc.cluster, timeout_s=60)
    verdict = time.monotonic() - start
    left = sh(vc, "ctl", "squeue -h -n corral-validate -o %i").split()
    named = any("gpu02" in f for f in report.failures)
    start = time.monotonic()
    sh(vc, "gpu02", "systemctl start slurmd")
    until(lambda: "idle" in sh(vc, "ctl", "sinfo -h -n gpu02 -o %T"))
    return {"recover": time.monotonic() - start, "lost": "-", "verdict": verdict,
            "note": f"gpu02 named: {named}; validate jobs left: {len(left)}"}


def kill9(vc, node: str, unit: str, probe) -> dict:
    jobs = hold_jobs(vc)
    pid = sh(vc, node, f"systemctl show -p MainPID --value {unit}").strip()
    start = time.monotonic()
    sh(vc, node, f"kill -9 {pid}")
    time.sleep(0.2)
    until(lambda: sh(vc, node, f"systemctl is-active {unit}", check=False).strip() == "active" and probe())
    return {"recover": time.monotonic() - start, "lost": lost(vc, jobs), "verdict": None, "note": ""}


def slurmdbd_kill(vc) -> dict:
    pid = sh(vc, "ctl", "systemctl show -p MainPID --value slurmdbd").strip()
    start = time.monotonic()
    sh(vc, "ctl", f"kill -9 {pid}")
    job = sh(vc, "ctl", "sbatch --parsable --wait -A research -N1 --wrap true").strip()
    until(lambda: in_sacct(vc, job))
    return {"recover": time.monotonic() - start, "lost": 0, "verdict": None, "note": "job run meanwhile accounted"}


def mariadb_restart(vc) -> dict:
    start = time.monotonic()
    sh(vc, "ctl", "systemctl stop mariadb")
    job = sh(vc, "ctl", "sbatch --parsable --wait -A research -N1 --wrap true").strip()
    sh(vc, "ctl", "systemctl start mariadb")
    until(lambda: in_sacct(vc, job))
    return {"recover": time.monotonic() - start, "lost": 0, "verdict": None, "note": "job run meanwhile accounted"}


def ha_primary_stop(vc) -> dict:
    jobs = hold_jobs(vc)
    start = time.monotonic()
    sh(vc, "ctl", "systemctl stop slurmctld")
    until(lambda: bool(sh(vc, "ctl2", "sbatch --parsable --hold -A research --wrap true", check=False).strip()))
    took = time.monotonic() - start
    sh(vc, "ctl", "systemctl start slurmctld")
    until(lambda: sh(vc, "ctl", "scontrol ping", check=False).startswith("Slurmctld(primary) at ctl is UP"))
    queued = set(sh(vc, "ctl2", "squeue -h -o %i", check=False).split())
    sh(vc, "ctl", "scancel -u root", check=False)
    return {"recover": took, "lost": len([j for j in jobs if j not in queued]), "verdict": None,
            "note": "backup took over; control returned to the primary"}


def controller_loss(vc, work: Path) -> dict:
    jobs = hold_jobs(vc)
    taken = take(vc.cluster, work)
    assert taken.ok, taken.error
    start = time.monotonic()
    vc.destroy("ctl")
    vc.up()
    assert converge(vc.cluster, "apply", command="chaos-rebuild").ok
    done = restore(vc.cluster, Path(taken.file))
    assert done.ok, done.error
    slowest = max(done.steps, key=lambda s: s.get("s", 0))
    return {"recover": time.monotonic() - start, "lost": lost(vc, jobs), "verdict": None,
            "note": f"rebuild + apply + restore ({done.duration_s:.0f} s of it restore; slowest step: "
                    f"{slowest['step']} {slowest.get('s', 0):.0f} s)"}


FAULTS = [("node down mid-apply", node_down_mid_apply),
          ("slurmd dead during validate", slurmd_dead_during_validate),
          ("slurmctld kill -9", lambda vc: kill9(vc, "ctl", "slurmctld", lambda: ping_up(vc))),
          ("slurmdbd kill -9", slurmdbd_kill),
          ("MariaDB restart", mariadb_restart),
          ("primary controller stop (HA)", ha_primary_stop)]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=1)
    args = ap.parse_args()
    results: dict[str, list[dict]] = {}
    with tempfile.TemporaryDirectory(prefix="corral-chaos-") as d:
        path = Path(d) / "cluster.yaml"
        path.write_text(ha_spec(default_spec("chaos", 2, 4, "h100", BENCH_SUBNET, "corralbench0", 18088,
                                             usable=False)))
        vc = VirtualCluster(load(path))
        try:
            vc.up()
            assert converge(vc.cluster, "apply", command="chaos-deploy").ok
            for _ in range(args.runs):
                for name, fault in FAULTS:
                    results.setdefault(name, []).append(fault(vc))
                results.setdefault("controller loss + restore", []).append(controller_loss(vc, Path(d) / "backups"))
        finally:
            vc.down()
    rows = []
    for name, runs in results.items():
        rec = median([r["recover"] for r in runs])
        verdicts = [r["verdict"] for r in runs if r["verdict"] is not None]
        lost_ = runs[-1]["lost"] if runs[-1]["lost"] == "-" else max(r["lost"] for r in runs)
        rows.append([name, f"{rec:.1f}", str(lost_), f"{median(verdicts):.1f}" if verdicts else "-", runs[-1]["note"]])
    print(table(f"faults on the virtual cluster (median of {args.runs})",
                ["fault", "recovered in (s)", "jobs lost", "verdict in (s)", "note"], rows))


if __name__ == "__main__":
    main()
