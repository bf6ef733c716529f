"""The one sacct query of `corral report usage` and its pure parser.

The query (sacct(1), Slurm's doc/man/man1/sacct.1; slurmdbd's selection in
src/plugins/accounting_storage/mysql/as_mysql_jobacct_process.c, `_state_time_string`):
- `--allocations` (-X): one line per job allocation, no step lines; `--allusers`: every user's jobs.
- `--duplicates`: every run of a requeued job is its own record (the earlier runs end REQUEUED); without
  it sacct keeps only the newest and the GPU-hours of the runs before a requeue would be lost.
- `--starttime S --endtime E --state STATES`: with states, slurmdbd selects per state "was in it during
  [S, E]": RUNNING = started before E and not ended before S (every job that ran in the window,
  whatever its final state); a final state (COMPLETED, FAILED, CANCELLED, ...) = ended in [S, E] in that
  state (adds the jobs cancelled or failed before they started). Pending jobs are not asked for.
- `TZ=UTC`: S and E are read, and Submit/Start/End printed, in UTC (sacct uses the node's local time);
  `SLURM_TIME_FORMAT=standard`: `YYYY-MM-DDTHH:MM:SS` whatever an admin's environment says.
- no `--truncate`: Start and End are the job's own (the queue wait needs the real Start); the report
  clips the run time to the window itself (reports/usage.py).

A line: JobIDRaw|User|Account|Partition|QOS|State|Submit|Start|End|ElapsedRaw|AllocTRES|NCPUS, e.g.
`4242|alice|vision|gpu|normal|COMPLETED|2026-03-02T09:58:01|2026-03-02T10:00:00|2026-03-02T12:00:00|7200|`
`billing=16,cpu=16,gres/gpu=2,gres/gpu:h100=2,mem=64G,node=1|16`. Start/End of a job that never started
or has not ended: `Unknown` (a job cancelled while pending gets Start = End from slurmdbd, and an empty
AllocTRES: "blank for pending jobs"); State of a job cancelled by someone: `CANCELLED by 1000`.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from corral.engine.shell import Raw, cmd

FIELDS = ("JobIDRaw", "User", "Account", "Partition", "QOS", "State", "Submit", "Start", "End",
          "ElapsedRaw", "AllocTRES", "NCPUS")
# every state a job that used or could have used the cluster in the window ends in (see above)
STATES = ("RUNNING", "COMPLETED", "FAILED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "CANCELLED",
          "PREEMPTED", "BOOT_FAIL", "DEADLINE")
NO_TIME = frozenset({"Unknown", "None", "N/A", ""})
UNTYPED = "gpu"  # the type of GPUs AllocTRES does not break down by type (gres/gpu=N only)
_EPOCH = dt.datetime(1970, 1, 1)
_SECOND = dt.timedelta(seconds=1)


def slurm_time(t: dt.datetime) -> str:
    """A UTC time as sacct reads it under TZ=UTC: YYYY-MM-DDTHH:MM:SS."""
    return t.astimezone(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")


def sacct_command(since: dt.datetime, until: dt.datetime) -> str:
    """The one query, every part a quoted word."""
    return cmd(Raw("TZ=UTC"), Raw("SLURM_TIME_FORMAT=standard"), "sacct", "--allusers", "--allocations",
               "--duplicates", "--parsable2", "--noheader", "--starttime", slurm_time(since), "--endtime",
               slurm_time(until), "--state", ",".join(STATES), "--format", ",".join(FIELDS)).get_raw_value()


@dataclass(slots=True)
class Job:
    """One allocation (job run) as sacct printed it; times in seconds since the epoch (UTC)."""

    job_id: str
    user: str
    account: str
    partition: str
    qos: str
    state: str              # the first word: CANCELLED of "CANCELLED by 1000"
    submit: int
    start: int | None       # None: never started (no allocation)
    end: int | None         # None: still running
    elapsed: int            # ElapsedRaw: run time less suspended time, s
    ncpus: int
    gpus: dict[str, int]    # GPU type -> GPUs allocated; untyped ones under UNTYPED (shared: read only)


def epoch(text: str) -> int:
    """`YYYY-MM-DDTHH:MM:SS` (UTC) -> seconds since the epoch; ValueError for anything else."""
    if len(text) != 19 or text[10] != "T":
        raise ValueError(text)
    return (dt.datetime.fromisoformat(text) - _EPOCH) // _SECOND


def _maybe(text: str) -> int | None:
    return None if text in NO_TIME else epoch(text)


def gpus_of(tres: str) -> dict[str, int]:
    """AllocTRES -> GPU type -> count. `gres/gpu=N` is the total; `gres/gpu:TYPE=n` the typed part
    (AccountingStorageTRES tracks both); GPUs the typed entries do not cover count as UNTYPED."""
    if "gres/gpu" not in tres:
        return {}
    total, typed = 0, {}
    for item in tres.split(","):
        if item.startswith("gres/gpu="):
            total = int(item[9:])
        elif item.startswith("gres/gpu:"):
            name, _, count = item[9:].partition("=")
            n = int(count)
            if n > 0:
                typed[name] = typed.get(name, 0) + n
    rest = total - sum(typed.values())
    if rest > 0:
        typed[UNTYPED] = rest
    return typed


def parse(lines) -> tuple[list[Job], list[str]]:
    """sacct's lines -> (jobs, the lines not understood). Never raises on its input: a line with another
    number of fields, a time or number that is not one, is set aside (blank lines are ignored)."""
    jobs: list[Job] = []
    bad: list[str] = []
    n = len(FIELDS)
    append = jobs.append
    shapes: dict[str, dict[str, int]] = {}  # AllocTRES -> its GPUs: a cluster's jobs come in few shapes
    for line in lines:
        line = line.rstrip("\n")
        if not line.strip():
            continue
        f = line.split("|")
        if len(f) != n:
            bad.append(line)
            continue
        try:
            tres = f[10]
            start = _maybe(f[7]) if tres else None  # no allocation: it never ran (Start = End if cancelled)
            gpus = shapes.get(tres)
            if gpus is None:
                gpus = gpus_of(tres)
                if len(shapes) < 100_000:
                    shapes[tres] = gpus
            append(Job(f[0], f[1], f[2], f[3], f[4], f[5].split(" ", 1)[0], epoch(f[6]), start,
                       _maybe(f[8]), int(f[9]), int(f[11]), gpus))
        except ValueError:
            bad.append(line)
    return jobs, bad
