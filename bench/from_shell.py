"""The `corral` process as a user runs it, timed from the shell (issue 38): wall clock, the CPU time of
the process and the children it waited for (user + sys, from getrusage(RUSAGE_CHILDREN) deltas) and
the machine's 1-minute load average when it started, so that a figure from a busy machine shows as
such; the run's own split read back from its journal; a throwaway directory for the default spec."""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import NamedTuple

from bench.common import median, spread, verdict, write_spec

CORRAL = [sys.executable, "-m", "corral"]


@contextmanager
def shell_cluster(compute: int = 2):
    """A directory holding the default spec for `corral` run from the shell (nothing started); the
    cluster it brings up is always taken down (`corral virtual down`) and the directory removed."""
    directory = Path(tempfile.mkdtemp(prefix="corral-bench-shell-"))
    try:
        write_spec(directory, compute)
        yield directory
    finally:
        down = corral(["virtual", "down", "--dir", str(directory)], directory)
        if down.returncode:
            print(f"corral virtual down --dir {directory} failed: {down.stderr[-2000:]}", file=sys.stderr)
        shutil.rmtree(directory, ignore_errors=True)


class Timing(NamedTuple):
    wall: float  # seconds, from the shell
    cpu: float   # user + sys seconds of the process and the children it waited for
    load: float  # the machine's 1-minute load average when it started


class Ran(NamedTuple):
    timing: Timing
    returncode: int
    stdout: str
    stderr: str
    lines: tuple[tuple[float, str], ...]  # each line of stderr and when it came (seconds since the start)

    def at(self, prefix: str) -> float:
        """Seconds from the start to the first line of stderr that starts with `prefix`."""
        return next(s for s, line in self.lines if line.startswith(prefix))

    def check(self) -> Ran:
        assert self.returncode == 0, self.stdout[-2000:] + self.stderr[-2000:]
        return self


def _cpu_of_children() -> float:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def run_timed(command: list[str], *, timeout: float = 900, **kwargs) -> Ran:
    """`command` to its end: wall clock, its CPU time, the load it ran under, and when each line of its
    stderr came (stdout goes to a file: a large --json output cannot block the process)."""
    with tempfile.TemporaryFile("w+") as out:
        load, cpu0, t0 = os.getloadavg()[0], _cpu_of_children(), time.perf_counter()
        p = subprocess.Popen(command, stdout=out, stderr=subprocess.PIPE, text=True, **kwargs)
        killer = threading.Timer(timeout, p.kill)
        killer.start()
        lines = tuple((time.perf_counter() - t0, line) for line in p.stderr)
        p.wait()
        timing = Timing(time.perf_counter() - t0, _cpu_of_children() - cpu0, load)
        killer.cancel()
        out.seek(0)
        return Ran(timing, p.returncode, out.read(), "".join(line for _, line in lines), lines)


def corral(args: list[str], directory: Path) -> Ran:
    """`corral ARGS` as a user runs it, on the bench's own directory: `corral up` works on the virtual
    directory (CORRAL_VIRTUAL_DIR, never the user's default one), the rest on its spec (CORRAL_SPEC)."""
    env = {k: v for k, v in os.environ.items() if k not in ("CORRAL_SPEC", "CORRAL_VIRTUAL_DIR")}
    env.update(CORRAL_SPEC=str(directory / "cluster.yaml"), CORRAL_VIRTUAL_DIR=str(directory))
    return run_timed(CORRAL + args, cwd=directory, env=env)


def journaled(directory: Path, run_id: str) -> dict:
    """A run as its journal holds it, with where its time went under "time" (engine/timing.py), read the
    way a user reads it: `corral history --run ID --timing --json`."""
    return json.loads(corral(["history", "--run", run_id, "--timing", "--json"], directory).check().stdout)


def noop_apply(directory: Path) -> tuple[Timing, dict]:
    """`corral apply --yes` from the shell on a converged cluster (asserted: 0 changes), and the run as
    journaled."""
    ran = corral(["apply", "--yes", "--json"], directory).check()
    run = journaled(directory, json.loads(ran.stdout)["run_id"])
    assert run["ok"] and run["changed"] == 0, (run["changed"], run["failed_nodes"])
    return ran.timing, run


def median_timing(timings: list[Timing]) -> Timing:
    return Timing(*(median([getattr(t, f) for t in timings]) for f in Timing._fields))


def row(what: str, timings: list[Timing], goal: float | None) -> list[str]:
    """One line of a from-the-shell table: median wall and its range, median CPU s and load, the goal."""
    cpu, load = median([t.cpu for t in timings]), median([t.load for t in timings])
    walls = [t.wall for t in timings]
    return [what, *spread(walls), "" if cpu != cpu else f"{cpu:.2f}", "" if load != load else f"{load:.2f}",
            *verdict(median(walls), goal)]


SHELL_HEADER = ["what a user runs", "median wall s", "range s", "CPU s", "load (1 min)", "goal s", ""]
