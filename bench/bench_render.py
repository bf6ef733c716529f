"""Render slurm.conf, gres.conf, cgroup.conf and slurmdbd.conf for a 10,000-node heterogeneous spec.

Run: .venv/bin/python -m bench.bench_render [--nodes 10000] [--runs 5]
Goal: all four files in <= 1 s (median of the runs). Loading the spec is shown apart.
"""

from __future__ import annotations

import argparse
import ipaddress
import random
import time

from bench.common import median, table, timed
from corral.render import (NodeHW, render_cgroup_conf, render_gres_conf, render_slurm_conf,
                           render_slurmdbd_conf)
from corral.spec.loader import load_text

GOAL_S = 1.0
# (name prefix, share of the nodes, GPU model or None, GPUs per node, NVLink, addresses as a shuffled list)
MIX = [("h100-", 0.35, "h100", 8, True, False), ("h200-", 0.10, "h200", 8, True, False),
       ("a100-", 0.20, "a100", 4, False, False), ("l40s-", 0.10, "l40s", 2, False, True),
       ("cpu", 0.25, None, 0, False, False)]
GROUP = 500  # nodes per spec group


def spec_yaml(total: int, seed: int = 1) -> str:
    rnd = random.Random(seed)
    base = int(ipaddress.IPv4Address("10.64.0.0"))
    out = ["name: bench", "nodes:",
           "  - {names: 'ctl[1-2]', addresses: '10.0.0.[1-2]', roles: [controller]}",
           "  - {names: db1, addresses: [10.0.0.5], roles: [accounting]}",
           "  - {names: 'login[1-2]', addresses: '10.0.0.[8-9]', roles: [login]}"]
    cursor = 0
    for prefix, share, model, count, nvlink, shuffled in MIX:
        n = round(total * share)
        for start in range(0, n, GROUP):
            size = min(GROUP, n - start)
            ips = [str(ipaddress.IPv4Address(base + cursor + i)) for i in range(size)]
            cursor += size + 16
            if shuffled:
                rnd.shuffle(ips)
            out.append(f"  - names: {prefix}[{start + 1:05d}-{start + size:05d}]")
            out.append(f"    addresses: [{', '.join(ips)}]" if shuffled
                       else f"    addresses: {ips[0]}-{ips[-1]}")
            out.append("    roles: [compute]")
            if model:
                out.append(f"    gpus: {{model: {model}, count: {count}, nvlink: {str(nvlink).lower()}}}")
                odd = f"{prefix}{start + 1 + rnd.randrange(size):05d}"  # one node per group with fewer GPUs
                out.append(f"    overrides: {{{odd}: {{gpus: {{count: {count // 2}}}}}}}")
    out += ["slurm:", "  qos:", "    - {name: normal, preempt: [scavenger], preempt_mode: requeue}",
            "    - {name: scavenger, preempt_mode: requeue}", "  partitions:"]
    for prefix, *_ in MIX:
        out.append(f"    - {{name: {prefix.strip('-')}, nodes: '{prefix}[00001-{round(total * _[0]):05d}]'}}")
    out.append("    - {name: scavenger, nodes: ALL, qos: scavenger}")
    return "\n".join(out) + "\n"


def hw_facts(cluster, seed: int = 2) -> dict[str, NodeHW]:
    rnd = random.Random(seed)
    return {n.name: NodeHW(224, 2, 56, 2, 2063937) if n.gpus else NodeHW(64, 2, 32, 1, 515000)
            for n in cluster.with_role("compute") if rnd.random() > 0.01}  # 1% not probed yet


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=10_000)
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    text = spec_yaml(args.nodes)
    loads, cluster = [], None
    for _ in range(args.runs):
        t0 = time.perf_counter()
        cluster = load_text(text, "cluster.yaml")
        loads.append(time.perf_counter() - t0)
    hw = hw_facts(cluster)
    steps = {"slurm.conf": lambda: render_slurm_conf(cluster, hw),
             "gres.conf": lambda: render_gres_conf(cluster),
             "cgroup.conf": lambda: render_cgroup_conf(cluster),
             "slurmdbd.conf": lambda: render_slurmdbd_conf(cluster, db_password="bench")}
    times = {name: [] for name in steps}
    totals = []
    for _ in range(args.runs):
        t_all = 0.0
        for name, fn in steps.items():
            t = timed(fn)
            times[name].append(t)
            t_all += t
        totals.append(t_all)
    sizes = {name: fn() for name, fn in steps.items()}
    rows = [["load_text (spec -> Cluster, not in goal)", f"{median(loads):.3f}", "", ""]]
    for name in steps:
        rows.append([f"render {name}", f"{median(times[name]):.4f}", f"{len(sizes[name].splitlines())}", ""])
    total = median(totals)
    verdict = "PASS" if total <= GOAL_S else "FAIL"
    rows.append(["render all four", f"{total:.3f}", "", f"<= {GOAL_S:.1f} s: {verdict}"])
    title = (f"Render Slurm configs, {len(cluster.with_role('compute'))} compute nodes "
             f"({len(cluster.nodes)} in all), median of {args.runs}")
    print(table(title, ["step", "seconds", "lines", "goal"], rows))


if __name__ == "__main__":
    main()
