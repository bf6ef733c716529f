"""validate's check "jobs run as a user, output visible on the login node": the first spec user submits
a batch job from their home on the login node (`runuser`, then sbatch --wait, bounded); the job's
output file must appear in that home on the login node, owned by the user, saying which compute node
ran it as whom. The file is removed afterwards, and a job still queued at the time bound is cancelled."""

from __future__ import annotations

import shlex
from collections.abc import Callable

from corral.checks.result import Check
from corral.errors import CorralError
from corral.spec.cluster import Cluster
from corral.spec.shared import home_mount

NAME = "user job"
WAIT_S = 150
MARK = "@@corral-user-job"

SCRIPT = r"""u={user}
h=$(getent passwd "$u" | cut -d: -f6)
[ -n "$h" ] && [ -d "$h" ] || {{ echo "{mark} NOHOME"; exit 0; }}
out=$(cd / && runuser -u "$u" -- timeout {wait} sbatch --parsable --wait -t 5 -J corral-validate -D "$h" \
      --output="$h/.corral-validate-%j.out" --wrap 'echo "$(hostname) $(id -un)"' 2>&1); rc=$?
id=$(printf '%s\n' "$out" | grep -Eo '^[0-9]+' | head -n1)
[ "$rc" -ne 0 ] && [ -n "$id" ] && scancel "$id" 2>/dev/null
f="$h/.corral-validate-$id.out"
echo "{mark} RC $rc"
echo "{mark} JOB ${{id:-none}}"
echo "{mark} SBATCH $(printf '%s' "$out" | tail -n 2 | tr '\n' ' ')"
[ -n "$id" ] && [ -f "$f" ] && echo "{mark} FILE $(stat -c %U "$f") $(head -c 200 "$f" | tr '\n' ' ')"
[ -n "$id" ] && rm -f "$f"
true
"""


def _pick(cluster: Cluster) -> tuple[str, str] | None:
    """(login node, user): a login node that is not the controller if there is one."""
    logins = cluster.with_role("login")
    node = next((n for n in logins if "controller" not in n.roles), logins[0] if logins else None)
    users = [u for u in cluster.spec.users if u.accounts] or list(cluster.spec.users)
    if node is None or not users:
        return None
    return node.name, users[0].name


def parse(text: str) -> dict[str, str]:
    got = {}
    for line in text.splitlines():
        if line.startswith(MARK + " "):
            key, _, value = line[len(MARK) + 1:].partition(" ")
            got[key] = value.strip()
    return got


def user_job(cluster: Cluster, run: Callable) -> Check:
    picked = _pick(cluster)
    if picked is None:
        why = "no login node in the spec" if not cluster.with_role("login") else "no users in the spec"
        return Check(NAME, "SKIPPED", why)
    if home_mount(cluster) is None:
        return Check(NAME, "SKIPPED", f"homes ({cluster.spec.identity.homes}) are on no shared mount")
    node, user = picked
    script = SCRIPT.format(user=shlex.quote(user), wait=WAIT_S, mark=MARK)
    try:
        proc = run(node, script, timeout=WAIT_S + 30)
    except CorralError as exc:
        return Check(NAME, "FAIL", f"{node}: {exc}")
    got = parse(proc.stdout)
    if "NOHOME" in got:
        return Check(NAME, "FAIL", f"{user} has no home directory on {node}")
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
