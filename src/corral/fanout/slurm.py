"""The fan-out through Slurm, run on the controller as one bounded script:

1. `sbatch` of a sleeping job: one allocation of the nodes (a task, one CPU, MEM_MB each), named
   corral-fanout; not running within ALLOC_S (a node busy with jobs that leave no CPU or memory free)
   it is cancelled and Slurm's pending reason reported (nothing waits in the queue). Not `salloc
   --no-shell`: with PrologFlags=Alloc it polls for the nodes' readiness every 3 s.
2. `srun --overlap` a step that makes /var/lib/corral/{fanout,runtime} (0700) and says which nodes lack the runtime.
3. `sbcast` the runtime tarball (only when a node lacks it) and the snapshot: Slurm's own tree
   fan-out, not one copy per node from the controller.
4. `srun` one task per node: unpack the runtime if new (old ones removed), check the node's Python is
   the runtime's, `corral node converge`, remove the snapshot; each node prints its CORRAL-RESULT lines.
5. The allocation is cancelled on every exit (trap), waited for until it has left the queue (its
   epilogs done, at most 60 s), and the controller's snapshot removed.

Root runs Python here, in a job step: its working directory is the submitter's (or /tmp on a node
where that directory is missing), a place users can write. So the script and every step start in /
(`cd /`, `srun --chdir=/`) and Python never puts the working directory on sys.path (`-I` for the
version probe; `-P` for corral, whose runtime comes by PYTHONPATH, which `-I` would ignore).
"""

from __future__ import annotations

from corral.engine.shell import q

NAME = "corral-fanout"
DIR = "/var/lib/corral/fanout"
RUNTIMES = "/var/lib/corral/runtime"
MEM_MB = 512
ALLOC_S = 15        # the nodes are free now (within this) or the fan-out is refused
# after scancel: until the job has left the queue (its epilogs run), at most 60 s, so that the script
# returns when nothing of it is left and a fan-out right after it finds the nodes free
END_WAIT = "for i in $(seq 600); do [ -z \"$(squeue -h -j \"$job\" 2>/dev/null)\" ] && break; sleep 0.1; done"
STEP_S = 60         # the preparing step and the snapshot's sbcast
SBCAST_S = 300      # the runtime's sbcast (15 MB, once per corral installation)
FAIL = "CORRAL-FAIL"


def tarball(rid: str) -> str:
    return f"{DIR}/corral-runtime-{rid}.tar.gz"


def task(rid: str, python: str, snapshot: str, converge_s: int) -> str:
    """What each node runs (as root, in the allocation)."""
    rt, tgz = f"{RUNTIMES}/{rid}", tarball(rid)
    return "\n".join([
        "set -u",
        "cd / || exit 1",
        'n="${SLURMD_NODENAME:-$(hostname -s)}"',
        f"if [ ! -f {q(rt + '/RUNTIME.json')} ]; then",
        f"  tmp={q(rt)}.tmp.$$; rm -rf \"$tmp\"; mkdir -p \"$tmp\"",
        f"  if tar -xzf {q(tgz)} -C \"$tmp\" && mv -T \"$tmp\" {q(rt)}; then",
        f"    find {q(RUNTIMES)} -mindepth 1 -maxdepth 1 ! -name {q(rid)} -exec rm -rf {{}} +",
        "  else",
        f"    rm -rf \"$tmp\"; echo \"{FAIL} $n cannot unpack the corral runtime {rid}\"; exit 1",
        "  fi",
        "fi",
        f"rm -f {q(tgz)}",
        "py=$(python3 -I -c 'import sys; print(\"%d.%d\" % sys.version_info[:2])' 2>&1)",
        f"if [ \"$py\" != {q(python)} ]; then",
        f"  echo \"{FAIL} $n python3 is $py here, the corral runtime was built for {python}\"; exit 1",
        "fi",
        f"PYTHONPATH={q(rt)} timeout -k 5 {int(converge_s)} python3 -P -m corral node converge --snapshot {q(snapshot)} --node \"$n\"",
        "rc=$?",
        f"rm -f {q(snapshot)}",
        f"[ $rc -ne 124 ] || echo \"{FAIL} $n corral node converge did not finish within {int(converge_s)} s\"",
        "exit $rc",
    ])


def script(nodes: str, count: int, rid: str, python: str, run_id: str, converge_s: int) -> str:
    """The controller's script; `nodes` a Slurm hostlist of `count` nodes, `run_id` hex."""
    snap = f"{DIR}/{run_id}.json"
    minutes = max(2, (converge_s + SBCAST_S + 3 * STEP_S) // 60 + 1)
    prep = (f"mkdir -p -m 700 {q(DIR)} {q(RUNTIMES)} && "
            f"{{ test -f {q(RUNTIMES + '/' + rid + '/RUNTIME.json')} || echo missing; }}")
    step = f"srun --jobid=\"$job\" --overlap --chdir=/ -Q -N {int(count)} --ntasks-per-node=1"
    return "\n".join([
        "set -u",
        "cd / || exit 1",
        "job=",
        f"trap '[ -z \"$job\" ] || {{ scancel --quiet \"$job\"; {END_WAIT}; }}; rm -f {q(snap)}' EXIT",
        "parts=$(sinfo -h -o %R | sort -u | paste -sd, -)",
        f"out=$(timeout -k 5 30 sbatch --parsable -J {NAME} -p \"$parts\" -w {q(nodes)} -N {int(count)} "
        f"--ntasks-per-node=1 --cpus-per-task=1 --mem={MEM_MB}M -t {int(minutes)} -o /dev/null -e /dev/null "
        f"--wrap {q(f'exec sleep {int(minutes) * 60}')} 2>&1)",
        "case \"$out\" in ''|*[!0-9]*) "
        f"echo \"{FAIL} - no allocation of the nodes: $(printf '%s' \"$out\" | tail -n 3 | tr '\\n' ' ')\"; exit 3;; esac",
        "job=$out",
        f"for i in $(seq {ALLOC_S * 10}); do [ \"$(squeue -h -j \"$job\" -o %T)\" = RUNNING ] && break; sleep 0.1; done",
        "if [ \"$(squeue -h -j \"$job\" -o %T)\" != RUNNING ]; then",
        f"  echo \"{FAIL} - no allocation of the nodes within {ALLOC_S} s (Slurm's reason: $(squeue -h -j \"$job\" -o %r))\"; exit 3",
        "fi",
        f"missing=$(timeout -k 5 {STEP_S} {step} sh -c {q(prep)} | grep -c missing)",
        "if [ \"$missing\" != 0 ]; then",
        f"  timeout -k 5 {SBCAST_S} sbcast --jobid=\"$job\" -f {q(tarball(rid))} {q(tarball(rid))} "
        f"|| {{ echo \"{FAIL} - sbcast of the corral runtime failed\"; exit 4; }}",
        "fi",
        f"timeout -k 5 {STEP_S} sbcast --jobid=\"$job\" -f {q(snap)} {q(snap)} "
        f"|| {{ echo \"{FAIL} - sbcast of the snapshot failed\"; exit 4; }}",
        f"timeout -k 5 {int(converge_s) + 30} {step} bash -c {q(task(rid, python, snap, converge_s))}",
    ])
