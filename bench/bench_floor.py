"""The hand floor beside `corral up` (bench_up.py, which runs it with --floor): the same default spec
(ctl, gpu01, gpu02, login1, on the bench subnet) brought up with `corral virtual up` from the shell,
then by hand, as fast as plain ssh allows: every node's packages (exactly the package set of corral's
one transaction for that node, read from `corral plan --json` beforehand, untimed) in one apt
transaction per node, all nodes at once, services held back as corral does; a minimal Slurm config
(the prototype's: munge key, slurm.conf, gres.conf, slurmdbd.conf; no health checks, job hooks,
monitoring config, users, PAM or checks); munge, MariaDB, slurmdbd, slurmctld, slurmd started; then
one GPU srun on every compute node. /etc/hosts gets the cluster's names (Slurm resolves them). No error handling beyond stopping,
nothing verified but the GPU srun.

Run as root: .venv/bin/python -m bench.bench_floor [--runs 3]; floor / corral up: bench_up --floor.
"""

from __future__ import annotations

import argparse
import json
import secrets
import shlex
import subprocess
import time
from pathlib import Path

from bench.common import spread, table
from bench.from_shell import corral, shell_cluster
from corral.engine.remote import ssh_argv
from corral.spec.loader import load

HOLD = "printf '#!/bin/sh\\nexit 101\\n' > /usr/sbin/policy-rc.d && chmod 755 /usr/sbin/policy-rc.d"


def packages(directory: Path) -> dict[str, list[str]]:
    """{node: packages of its one transaction}, from corral's plan (untimed)."""
    plan = json.loads(corral(["plan", "--json"], directory).check().stdout)
    out: dict[str, list[str]] = {}
    for name, node in plan["nodes"].items():
        for op in node["ops"]:
            if op["name"].startswith("packages |") and op["status"] == "changed":
                for c in op["commands"]:  # ... -o Dpkg::Options::=--force-confold PKG... || { apt-get update ...
                    if "apt-get" in c and "--force-confold " in c:
                        words = shlex.split(c.split("--force-confold ", 1)[1].split(" || ", 1)[0])
                        out.setdefault(name, []).extend(w for w in words if not w.startswith("-"))
                        break
    return out


def on_all(cluster, commands: dict[str, str], stdin: dict[str, bytes] | None = None) -> None:
    procs = {n: subprocess.Popen(ssh_argv(cluster, n, f"bash -e -o pipefail -c {shlex.quote(c)}"),
                                 stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
             for n, c in commands.items()}
    for n, p in procs.items():
        _, err = p.communicate((stdin or {}).get(n, b""), timeout=300)
        assert p.returncode == 0, (n, commands[n][:200], err.decode()[-800:])


def slurm_conf(compute: list[str], cpus: int, gpus: int) -> str:
    return "\n".join([
        "ClusterName=floor", "SlurmctldHost=ctl", "AuthType=auth/munge", "SlurmUser=slurm",
        "StateSaveLocation=/var/lib/slurm/slurmctld", "SlurmdSpoolDir=/var/lib/slurm/slurmd",
        "ProctrackType=proctrack/linuxproc", "TaskPlugin=task/affinity", "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_Core", "GresTypes=gpu", "ReturnToService=2",
        "AccountingStorageType=accounting_storage/slurmdbd", "AccountingStorageHost=ctl",
        "JobAcctGatherType=jobacct_gather/linux", "MpiDefault=none",
        f"NodeName={','.join(compute)} CPUs={cpus} RealMemory=1000 Gres=gpu:h100:{gpus} State=UNKNOWN",
        f"PartitionName=gpu Nodes={','.join(compute)} Default=YES MaxTime=INFINITE State=UP", ""])


def one_run() -> dict:
    with shell_cluster() as directory:
        up = corral(["virtual", "up", "--dir", str(directory)], directory).check().timing
        c = load(directory / "cluster.yaml")
        pkgs = packages(directory)
        compute = [n.name for n in c.nodes if "compute" in n.roles]
        gpus = c.node(compute[0]).gpu_count
        t: dict[str, float] = {"up": up.wall, "load": up.load}
        t0 = time.perf_counter()
        on_all(c, {n: f"{HOLD}; export DEBIAN_FRONTEND=noninteractive; apt-get update -qq; apt-get install -y -qq "
                      f"{' '.join(shlex.quote(p) for p in pkgs[n])} >/dev/null; rm -f /usr/sbin/policy-rc.d"
                   for n in pkgs})
        t["install"] = time.perf_counter() - t0
        t1 = time.perf_counter()
        cpus = int(subprocess.run(ssh_argv(c, compute[0], "nproc"), capture_output=True, text=True).stdout)
        key, pw = secrets.token_bytes(1024), secrets.token_hex(16)
        conf = slurm_conf(compute, cpus, gpus)
        hosts = "".join(f"{n.address} {n.name}\n" for n in c.nodes)
        write = (f"printf %s {shlex.quote(hosts)} >> /etc/hosts; "
                 "install -o munge -g munge -m 400 /dev/stdin /etc/munge/munge.key; "
                 f"printf %s {shlex.quote(conf)} > /etc/slurm/slurm.conf; ")
        gres = f"printf 'Name=gpu Type=h100 File=/dev/nvidia[0-{gpus - 1}]\\n' > /etc/slurm/gres.conf; "
        dbd = ("AuthType=auth/munge\nDbdHost=ctl\nSlurmUser=slurm\nStorageType=accounting_storage/mysql\n"
               f"StorageHost=localhost\nStorageUser=slurm\nStoragePass={pw}\nStorageLoc=slurm_acct_db\n")
        ctl = (write + f"install -o slurm -g slurm -m 600 /dev/null /etc/slurm/slurmdbd.conf; "
               f"printf %s {shlex.quote(dbd)} > /etc/slurm/slurmdbd.conf; "
               "install -d -o slurm -g slurm /var/lib/slurm/slurmctld; systemctl restart munge mariadb; "
               f"mysql -e \"CREATE DATABASE IF NOT EXISTS slurm_acct_db; CREATE USER IF NOT EXISTS slurm@localhost "
               f"IDENTIFIED BY '{pw}'; GRANT ALL ON slurm_acct_db.* TO slurm@localhost\"; systemctl restart slurmdbd; "
               "for i in $(seq 100); do ss -ltn | grep -q ':6819 ' && break; sleep 0.2; done; systemctl restart slurmctld; "
               "for i in $(seq 100); do timeout 2 scontrol ping | grep -q UP && break; sleep 0.2; done; "
               "timeout 2 scontrol ping | grep -q UP")
        on_all(c, {"ctl": ctl}, stdin={"ctl": key})
        on_all(c, {n: write + gres + "systemctl restart munge slurmd" for n in compute},
               stdin={n: key for n in compute})
        t["config + start"] = time.perf_counter() - t1
        t2 = time.perf_counter()
        on_all(c, {"ctl": "for i in $(seq 300); do [ \"$(sinfo -h -o '%T %D')\" = 'idle "
                          f"{len(compute)}' ] && break; sleep 0.2; done; "
                          f"timeout 60 srun -N{len(compute)} --gres=gpu:1 -t1 nvidia-smi -L >/dev/null"})
        t["ready + GPU srun"] = time.perf_counter() - t2
        t["floor"] = time.perf_counter() - t0
        t["total"] = up.wall + t["floor"]
        return t


PHASES = ["up", "install", "config + start", "ready + GPU srun", "floor", "total"]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    runs = [one_run() for _ in range(args.runs)]
    rows = [[p, *spread([r[p] for r in runs], 1)] for p in PHASES]
    print(table(f"hand floor, default spec (4 nodes), cached image (median of {args.runs}; load (1 min) at the "
                f"starts {min(r['load'] for r in runs):.2f}-{max(r['load'] for r in runs):.2f})",
                ["part", "median s", "range s"], rows))


if __name__ == "__main__":
    main()
