"""One bounded Slurm batch job submitted from a login node and waited for (`sbatch --wait` under `timeout`),
the steps of `corral images pull` (images_pull.py) and `corral software build` (software_build.py) share:
the submit script, which cancels the job at the bound and reports it through MARK lines (RC, JOB, STATE,
SBATCH, then the job's own MARK lines from its log), and the cancel script a failure, the bound or Ctrl-C
runs (the job cancelled by name and waited for, so it writes no more). `as_user`: submitted as that
account (runuser), so the job is theirs and never root's. Every value is quoted here."""

from __future__ import annotations

from corral.engine.shell import q

SUBMIT = r"""cd / || exit 1
out=$(timeout {wait} {runas}sbatch --parsable --wait {options}-N1 -n1 -t {limit} -J {job} -o {log} --wrap {script} 2>&1); rc=$?
id=$(printf '%s\n' "$out" | grep -Eo '^[0-9]+' | head -n1)
if [ "$rc" -ne 0 ] && [ -n "$id" ]; then
  echo "{mark} STATE $(squeue -h -j "$id" -o %T 2>/dev/null | head -n1)"
  scancel "$id" 2>/dev/null
fi
echo "{mark} RC $rc"
echo "{mark} JOB ${{id:-none}}"
echo "{mark} SBATCH $(printf '%s' "$out" | tail -n 2 | tr '\n' ' ')"
[ -f {log} ] && grep -a "^{mark} " {log}
true
"""

CANCEL = r"""scancel -n {job} 2>/dev/null
for _ in $(seq 20); do [ -z "$(squeue -h -n {job} -o %i 2>/dev/null)" ] && break; sleep 1; done
true
"""


def minutes(wait: int) -> int:
    """The job's time limit for a bound of `wait` seconds (whole minutes, rounded up)."""
    return max(1, -(-int(wait) // 60))


def submit_script(job: str, log: str, script: str, wait: int, mark: str, *, as_user: str | None = None,
                  node: str | None = None, limit: int | None = None) -> str:
    """`script` as job `job` (its output in `log`), waited for at most `wait` s; on `node` if given; its time
    limit `limit` minutes (default: the bound's)."""
    runas = f"runuser -u {q(as_user)} -- " if as_user else ""
    options = f"-w {q(node)} " if node else ""
    return SUBMIT.format(wait=int(wait), runas=runas, options=options, limit=int(limit or minutes(wait)),
                         job=q(job), log=q(log), script=q(script), mark=mark)


def cancel_script(job: str) -> str:
    return CANCEL.format(job=q(job))


def parse_marks(text: str, mark: str) -> dict[str, str]:
    """The `mark` lines of a job's output: KEY value (the last of each key)."""
    got: dict[str, str] = {}
    for line in text.splitlines():
        if line.startswith(mark + " "):
            key, _, value = line[len(mark) + 1:].partition(" ")
            got[key] = value.strip()
    return got


def first_login(cluster, what: str, why: str) -> str:
    """The first login node's name (where a command reaches shared storage and submits its job), or a
    UsageError naming the command `what` and `why` it needs one."""
    from corral.errors import UsageError
    logins = cluster.with_role("login")
    if not logins:
        raise UsageError(f"corral {what} needs a login node in the spec ({why})", fix="give a node the login role")
    return logins[0].name
