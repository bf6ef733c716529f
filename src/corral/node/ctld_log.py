"""What slurmctld's own log says about its last restart (pure, stdlib only: runs on the controller and on
the control host): was the previous run of slurmctld ended cleanly, and which jobs did it acknowledge
that the new run did not recover.

Why: slurmctld saves its job state asynchronously (a background thread, a few seconds behind). After
an unclean end (kill -9, a crash, the node's power) the jobs accepted since the last save are gone: not
in squeue, not in sacct, and their IDs are handed out again; a job that finished after the last save
runs again. Slurm says nothing about it; its log has both halves:
- a run starts with `slurmctld version V started on cluster C` (25.05: `C(ID)`);
- `_slurm_rpc_submit_batch_job: JobId=N ...`, `_slurm_rpc_submit_batch_het_job: JobId=N ...` and
  `sched: _slurm_rpc_allocate_resources JobId=N ...` (salloc/srun) are the acknowledgements;
- `Recovered JobId=N Assoc=A` is each job the start read back from the state save;
- `_job_complete: JobId=N done` and `_slurm_rpc_kill_job: REQUEST_KILL_JOB JobId=N` are ends;
- `sched: Allocate JobId=N ...` (and backfill's `_start_job: Started JobId=N`) is a start;
- a clean stop logs `Terminate signal (SIGINT or SIGTERM) received` (and `Saving all slurm state`).
An ID is the one users see: an array task's or het component's own ID is read as its array/het job.
Lines that are not understood are counted, never raised.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

# slurmctld's log prefix: `[2026-12-05T16:40:01.123] ` (LogTimeFormat=iso8601_ms, the default)
_LINE = re.compile(r"^\[(?P<ts>[0-9T:.\-+ ]+)\] (?P<msg>.*)$")
_START = re.compile(r"^slurmctld version (?P<version>\S+) started on cluster (?P<cluster>\S+?)(?:\(\d+\))?$")
_JOB = r"JobId=(?P<id>\d+)"
_ACKS = (re.compile(r"^_slurm_rpc_submit_batch(?:_het)?_job: " + _JOB),
         re.compile(r"^sched: _slurm_rpc_allocate_resources " + _JOB),
         re.compile(r"^_slurm_rpc_allocate_het_job: " + _JOB))
_RECOVERED = re.compile(r"^Recovered " + _JOB)
_ENDS = (re.compile(r"^_job_complete: " + _JOB + r"(?:_\S*)? done$"),
         re.compile(r"^_slurm_rpc_kill_job: REQUEST_KILL_JOB " + _JOB))
_RAN = re.compile(r"^sched(?:/backfill)?: (?:Allocate|_start_job: Started) " + _JOB)
_CLEAN_STOP = ("Terminate signal (SIGINT or SIGTERM) received", "Saving all slurm state")


@dataclass
class Run:
    """One run of slurmctld, from its start line to the next one."""
    started: str
    version: str
    acked: list[str] = field(default_factory=list)      # in order, once each
    recovered: set[str] = field(default_factory=set)
    ended: set[str] = field(default_factory=set)
    ran: set[str] = field(default_factory=set)
    clean_stop: bool = False
    recovery_done: bool = False                          # `Recovered information about N jobs` seen
    done_before: frozenset[str] = frozenset()             # IDs whose last event before this run was an end


@dataclass
class Restart:
    """The last restart of slurmctld the log shows, judged."""
    at: str | None                   # the new run's start time (None: no restart in the log)
    previous_started: str | None
    clean: bool
    lost: list[str]                  # acknowledged before, never ended, not recovered: gone, IDs reused
    reran: list[str]                 # ended before the crash, recovered as not done: they run again
    recovered: int
    not_understood: int = 0
    recovery_done: bool = True       # the new run has read its state back (False: still starting)

    def to_json(self) -> dict:
        return {"at": self.at, "previous_started": self.previous_started, "clean": self.clean,
                "lost": self.lost, "reran": self.reran, "recovered": self.recovered,
                "not_understood": self.not_understood, "recovery_done": self.recovery_done}


def runs(text: str) -> tuple[list[Run], int]:
    """The runs of slurmctld in the log text, oldest first; and the lines not understood (no timestamp)."""
    out: list[Run] = []
    odd = 0
    seen: set[str] = set()
    done: set[str] = set()       # across runs: IDs whose last event was an end (a new ack clears it)
    for raw in text.splitlines():
        m = _LINE.match(raw)
        if not m:
            odd += bool(raw.strip())
            continue
        msg = m["msg"].strip()
        if (s := _START.match(msg)):
            out.append(Run(started=m["ts"], version=s["version"], done_before=frozenset(done)))
            seen = set()
            continue
        if not out:
            continue
        run = out[-1]
        if msg.startswith("Recovered information about ") or (msg.startswith("No job state file") and
                                                                 msg.endswith(" to recover")):
            run.recovery_done = True
        elif any(msg.startswith(c) for c in _CLEAN_STOP):
            run.clean_stop = True
        elif (r := _RECOVERED.match(msg)):
            run.recovered.add(r["id"])
        elif (a := next((p.match(msg) for p in _ACKS if p.match(msg)), None)):
            if a["id"] not in seen:
                seen.add(a["id"])
                run.acked.append(a["id"])
            run.ended.discard(a["id"])   # an ID handed out again: what ended before was another job
            done.discard(a["id"])
        elif (e := next((p.match(msg) for p in _ENDS if p.match(msg)), None)):
            run.ended.add(e["id"])
            done.add(e["id"])
        elif (g := _RAN.match(msg)):
            run.ran.add(g["id"])
    return out, odd


def last_restart(text: str) -> Restart:
    """The judgement of the last restart in `text` (slurmctld's log, older rotations first)."""
    found, odd = runs(text)
    if len(found) < 2:
        return Restart(at=found[-1].started if found else None, previous_started=None, clean=True, lost=[],
                       reran=[], recovered=len(found[-1].recovered) if found else 0, not_understood=odd,
                       recovery_done=found[-1].recovery_done if found else True)
    before, now = found[-2], found[-1]
    # what the previous run held: what it recovered itself, and what it acknowledged
    held = list(dict.fromkeys([*sorted(before.recovered, key=int), *before.acked]))
    # ended (in that run or an earlier one, and not handed out again since): finished, not lost, even when
    # purged from memory before the save
    lost = [j for j in held if j not in now.recovered and j not in now.done_before]
    # an end the last save missed: the job comes back pending and is started again (seen later in the log)
    reran = sorted((now.done_before & now.recovered & now.ran) - set(now.acked), key=int)
    return Restart(at=now.started, previous_started=before.started, clean=before.clean_stop,
                   lost=[] if before.clean_stop else lost, reran=[] if before.clean_stop else reran,
                   recovered=len(now.recovered), not_understood=odd, recovery_done=now.recovery_done)
