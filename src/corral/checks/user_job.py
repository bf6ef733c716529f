"""validate's check "jobs run as a user, output visible on the login node": the first spec user submits
a batch job from their home on the login node (`runuser`, then sbatch --wait, bounded by what is left
of validate's job phase); the job's output file must appear in that home on the login node, owned by
the user and read as the user (root never opens a file in a user's home: links, root_squash), saying which compute node ran it as whom. The job is named corral-validate and kept off the
nodes the reachability pass skipped; the file is removed afterwards, and a job still queued or running
at the bound is cancelled (said whether it never started). validate cancels the user's corral-validate
jobs once more on its way out (`submitter`)."""

from __future__ import annotations

import shlex
from collections.abc import Callable

from corral.checks.result import Check, error_text
from corral.errors import CorralError
from corral.spec.cluster import Cluster
from corral.spec.hosts import compress_names
from corral.spec.shared import home_mount

NAME = "user job"
WAIT_S = 150
GRACE_S = 15  # beyond the job's bound: SSH, sudo, runuser
MARK = "@@corral-user-job"

# Everything in the user's home is touched as the user (`runuser`), never as root: root's reads there
# would follow whatever link the user put in place of the output (and root cannot read a root_squash
# NFS home at all). READ prints the owner and the first 200 bytes of $1, from the user's own view.
READ = r'''test -f "$1" && printf '%s %s\n' "$(stat -c %U -- "$1")" "$(head -c 200 -- "$1" | tr '\n' ' ')"'''
SCRIPT = r"""cd / || exit 1
u={user}
h=$(getent passwd "$u" | cut -d: -f6)
[ -n "$h" ] && timeout 20 runuser -u "$u" -- test -d "$h" || {{ echo "{mark} NOHOME"; exit 0; }}
out=$(runuser -u "$u" -- timeout {wait} sbatch --parsable --wait -t {limit} -J corral-validate{exclude} \
      -D "$h" --output="$h/.corral-validate-%j.out" --wrap 'echo "$(hostname) $(id -un)"' 2>&1); rc=$?
id=$(printf '%s\n' "$out" | grep -Eo '^[0-9]+' | head -n1)
if [ "$rc" -ne 0 ] && [ -n "$id" ]; then
  echo "{mark} STATE $(squeue -h -j "$id" -o %T 2>/dev/null | head -n1)"
  scancel "$id" 2>/dev/null
fi
f="$h/.corral-validate-$id.out"
echo "{mark} RC $rc"
echo "{mark} JOB ${{id:-none}}"
echo "{mark} SBATCH $(printf '%s' "$out" | tail -n 2 | tr '\n' ' ')"
if [ -n "$id" ]; then
  got=$(timeout 20 runuser -u "$u" -- sh -c {read} sh "$f" 2>/dev/null) && echo "{mark} FILE $got"
  timeout 20 runuser -u "$u" -- rm -f -- "$f"
fi
true
"""


def _pick(cluster: Cluster) -> tuple[str, str] | None:
    """(login node, user): a login node that is not the controller if there is one."""
    logins = cluster.with_role("login")
    node = next((n for n in logins if "controller" not in n.roles), logins[0] if logins else None)
    user = cluster.first_user()
    if node is None or user is None:
        return None
    return node.name, user


def submitter(cluster: Cluster) -> str | None:
    """The user whose batch job the check submits, None when it is skipped (validate cancels their
    corral-validate jobs)."""
    picked = _pick(cluster)
    return picked[1] if picked and home_mount(cluster) is not None else None


def script(user: str, wait: int, exclude: list[str] | tuple[str, ...] = ()) -> str:
    """The login node's script: `user` and the excluded nodes quoted, the bounds as numbers."""
    skip = f" -x {shlex.quote(compress_names(sorted(exclude)))}" if exclude else ""
    return SCRIPT.format(user=shlex.quote(user), wait=int(wait), limit=max(1, -(-int(wait) // 60)),
                         exclude=skip, mark=MARK, read=shlex.quote(READ))


def parse(text: str) -> dict[str, str]:
    got = {}
    for line in text.splitlines():
        if line.startswith(MARK + " "):
            key, _, value = line[len(MARK) + 1:].partition(" ")
            got[key] = value.strip()
    return got


def user_job(cluster: Cluster, run: Callable, *, wait: int = WAIT_S, exclude: list[str] | tuple[str, ...] = (),
             blocked: str | None = None) -> Check:
    """`wait`: seconds the job may take to start and finish; `exclude`: nodes it must not land on
    (the reachability pass skipped them); `blocked`: why it cannot be run at all (a FAIL)."""
    picked = _pick(cluster)
    if picked is None:
        why = "no login node in the spec" if not cluster.with_role("login") else "no users in the spec"
        return Check(NAME, "SKIPPED", why)
    if home_mount(cluster) is None:
        return Check(NAME, "SKIPPED", f"homes ({cluster.spec.identity.homes}) are on no shared mount")
    node, user = picked
    if blocked or wait <= 0:
        return Check(NAME, "FAIL", blocked or "not run: no time left in the job phase (--timeout)")
    try:
        proc = run(node, script(user, wait, exclude), timeout=wait + GRACE_S)
    except CorralError as exc:
        return Check(NAME, "FAIL", f"sbatch as {user} on {node}: {error_text(exc)}")
    got = parse(proc.stdout)
    if "NOHOME" in got:
        return Check(NAME, "FAIL", f"{user} has no home directory on {node}")
    if got.get("RC") in ("124", "137") and got.get("JOB", "none") == "none":
        return Check(NAME, "FAIL", f"sbatch as {user} on {node} gave no job id within {int(wait)} s")
    if got.get("RC") in ("124", "137"):  # `timeout` ended sbatch --wait: the job was cancelled
        state = got.get("STATE") or "no longer queued"
        what = "did not start" if state == "PENDING" else "did not finish"
        return Check(NAME, "FAIL", f"{user}'s job {got.get('JOB')} from {node} {what} within {int(wait)} s "
                                   f"({state}; cancelled)")
    if got.get("RC") != "0":
        return Check(NAME, "FAIL", f"{user}'s job from {node} failed (sbatch rc={got.get('RC', '?')}): "
                                   f"{got.get('SBATCH') or (proc.stdout + proc.stderr).strip()[-300:]}")
    words = got.get("FILE", "").split()
    if not words:
        return Check(NAME, "FAIL", f"job {got.get('JOB')} of {user} ran, but its output is not in {user}'s "
                                   f"home on {node} (is the home shared with the compute nodes?)")
    owner, ran = words[0], words[1:]
    if owner != user or len(ran) < 2 or ran[1] != user:
        return Check(NAME, "FAIL", f"job {got.get('JOB')}: output owned by {owner}, says {' '.join(ran)!r} "
                                   f"(expected to run as {user})")
    return Check(NAME, "OK", f"{user}'s job {got.get('JOB')} from {node} ran on {ran[0]} as {user}; its output "
                             f"is in {user}'s home on {node}")
