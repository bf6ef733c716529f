"""`corral report usage` on 100,000 sacct lines: parse + aggregate, by account and by GPU type.

Run: .venv/bin/python -m bench.bench_report [--lines 100000] [--runs 5]
Goal: parse + aggregate (the report of one grouping) < 2 s (median of the runs). Also timed, without a
goal: the GPU part's Prometheus answer for every GPU job (5 figures each, reports/prom_api.py) parsed and
joined per account (reports/gpu_use.py). The lines are synthetic,
seeded: sacct's --parsable2 format (tests/fixtures/sacct/README.md) with users, accounts, partitions,
QOS, typed GPUs (h100, a100, MIG 1g.10gb, untyped), CPU-only jobs, every final state, running jobs,
jobs cancelled while pending, jobs across the window's edges.
"""

from __future__ import annotations

import argparse
import datetime as dt
import random

from bench.common import median, table, timed
from corral.reports.gpu_use import by_group
from corral.reports.prom_api import figures
from corral.reports.promql import FIGURES
from corral.reports.sacct import parse
from corral.reports.usage import aggregate

GOAL_S = 2.0
SINCE = int(dt.datetime(2026, 3, 1, tzinfo=dt.timezone.utc).timestamp())
UNTIL = SINCE + 30 * 86400
STATES = (["COMPLETED"] * 60 + ["FAILED"] * 8 + ["TIMEOUT"] * 4 + ["NODE_FAIL", "OUT_OF_MEMORY", "PREEMPTED"]
          + ["CANCELLED by 1000"] * 10 + ["RUNNING"] * 5)
GPUS = [("h100", 8), ("h100", 1), ("h100", 2), ("a100", 4), ("a100", 1), ("1g.10gb", 1), (None, 2), ("", 0)]
PRICES = {"h100": 2.5, "a100": 1.2}


def _t(epoch: int) -> str:
    return dt.datetime.fromtimestamp(epoch, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")


def sacct_lines(n: int, seed: int = 7) -> list[str]:
    rnd = random.Random(seed)
    users = [f"user{i:03d}" for i in range(400)]
    accounts = [f"acct{i:02d}" for i in range(40)]
    partitions, qos = ["gpu", "gpu-long", "debug", "cpu", "mig"], ["normal", "high", "scavenger"]
    out = []
    for i in range(n):
        submit = SINCE - 86400 + rnd.randrange(31 * 86400)
        state = rnd.choice(STATES)
        model, count = rnd.choice(GPUS)
        cpus = max(1, count) * rnd.choice((4, 8, 16))
        if state.startswith("CANCELLED") and rnd.random() < 0.4:  # cancelled while pending: Start = End
            t = _t(submit + rnd.randrange(3600))
            out.append(f"{100000 + i}|{rnd.choice(users)}|{rnd.choice(accounts)}|{rnd.choice(partitions)}|"
                       f"{rnd.choice(qos)}|{state}|{_t(submit)}|{t}|{t}|0||0")
            continue
        start = submit + int(rnd.expovariate(1 / 1800))
        run = int(rnd.expovariate(1 / 7200)) + 1
        end = "Unknown" if state == "RUNNING" else _t(start + run)
        gres = "" if not count else (f",gres/gpu={count}" if model is None
                                     else f",gres/gpu={count},gres/gpu:{model}={count}")
        tres = f"billing={cpus},cpu={cpus}{gres},mem={cpus * rnd.choice((2, 4, 8, 16))}G,node=1"
        out.append(f"{100000 + i}|{rnd.choice(users)}|{rnd.choice(accounts)}|{rnd.choice(partitions)}|"
                   f"{rnd.choice(qos)}|{state}|{_t(submit)}|{_t(start)}|{end}|{run}|{tres}|{cpus}")
    return out


def prometheus_answer(jobs, seed: int = 7) -> str:
    """The answer to promql.usage_query for every job with GPUs, as Prometheus writes it (one line)."""
    rnd = random.Random(seed)
    out = []
    for job in jobs:
        if job.gpus:
            for name in FIGURES:
                out.append(f'{{"metric":{{"figure":"{name}","hpc_job":"{job.job_id}"}},'
                           f'"value":[{UNTIL},"{rnd.random() * 1e6:.6g}"]}}')
    return '{"status":"success","data":{"resultType":"vector","result":[' + ",".join(out) + "]}}"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--lines", type=int, default=100_000)
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    lines = sacct_lines(args.lines)
    parsed = parse(lines)[0]
    answer = prometheus_answer(parsed)
    steps = {"parse": lambda: parse(lines),
             "aggregate by account": lambda: aggregate(parsed, "account", SINCE, UNTIL, UNTIL, PRICES),
             "aggregate by gpu-type": lambda: aggregate(parsed, "gpu-type", SINCE, UNTIL, UNTIL, PRICES),
             "parse + aggregate by account": lambda: aggregate(parse(lines)[0], "account", SINCE, UNTIL, UNTIL,
                                                               PRICES),
             f"GPU part: Prometheus answer ({len(answer) / 1e6:.0f} MB) parse + by account":
                 lambda: by_group(parsed, figures(answer).jobs, "account", SINCE, UNTIL, UNTIL, 400.0)}
    times = {name: [timed(fn) for _ in range(args.runs)] for name, fn in steps.items()}
    rows = [[name, f"{median(ts):.3f}", ""] for name, ts in times.items()]
    total = median(times["parse + aggregate by account"])
    rows[3][2] = f"< {GOAL_S:.0f} s: {'PASS' if total < GOAL_S else 'FAIL'}"
    print(table(f"corral report usage: {len(lines):,} sacct lines ({len(parsed):,} jobs), median of {args.runs}",
                ["step", "seconds", "goal"], rows))


if __name__ == "__main__":
    main()
