"""validate's check "notebook" (workbench.jupyterhub): as the spec's first user, the hub starts a server
through its REST API (1 GPU of the default partition's first type, where it has GPUs), a kernel on it runs
one cell that prints its Slurm job id, the visible GPUs and its host, the server is stopped, and the job
must be gone from squeue. node/notebook_check.py does the hub's part on the hub node (the venv's python;
the tokens from the hub's 0600 environment file, never on a command line); this module builds its command,
reads its one JSON line and judges it. Bounded by what is left of validate's job phase."""

from __future__ import annotations

import json
import re

from corral.checks.result import Check, error_text
from corral.engine.shell import q
from corral.errors import CorralError
from corral.render import jupyterhub as hub
from corral.spec.cluster import Cluster
from corral.spec.releases import release
from corral.spec.workbench import hub_node
from corral.workbench_wheels import lock_id

NAME = "notebook"
GONE_S = 60


def options(cluster: Cluster) -> dict:
    """What the server asks for: the default partition, 1 GPU of its first type where it has GPUs."""
    parts = hub.offered(cluster)
    part = next((p for p in parts if p["default"]), parts[0])
    kinds = sorted(part["gpus"])
    return {"partition": part["name"], "gpus": 1 if kinds else 0, "gpu_type": kinds[0] if kinds else "",
            "cpus": 1, "time": "0:10:00"}


def command(cluster: Cluster, user: str, wait: int) -> str:
    node = hub_node(cluster)
    assert node is not None  # notebook_check runs it only where the spec has a hub
    venv = hub.venv(cluster, lock_id(release(node.os).python))
    return (f"set -a; . {q(hub.ENV)}; set +a; CORRAL_NOTEBOOK_OPTIONS={q(json.dumps(options(cluster)))} "
            f"timeout {int(wait) + 30} {q(venv + '/bin/python')} {q(hub.CHECK)} {q(user)} "
            f"{q(f'http://{node.address}:{hub.HUB_PORT}')} {q(f'http://127.0.0.1:{hub.PROXY_API_PORT}')} {int(wait)}")


def judge(out: str, asked: dict) -> tuple[str, str, str | None]:
    """(status, detail, job id) from the program's output."""
    line = next((x for x in reversed(out.strip().splitlines()) if x.startswith("{")), None)
    if line is None:
        return "FAIL", f"no answer from the check: {out.strip()[-300:] or 'no output'}", None
    got = json.loads(line)
    job = got.get("job") if re.fullmatch(r"\d+", str(got.get("job"))) else None
    if got.get("error"):
        return "FAIL", f"{got['user']}'s server: {got['error']}", job
    if job is None:
        return "FAIL", f"the cell printed no Slurm job id ({got.get('job')!r}): the server did not run in a job", None
    gpus = [g for g in str(got.get("gpus", "-")).split(",") if g not in ("", "-")]
    if len(gpus) != asked["gpus"]:
        return "FAIL", f"job {job} sees GPUs {got.get('gpus')!r}, {asked['gpus']} asked", job
    seen = f"GPU {gpus[0]}" if gpus else "no GPU (none asked)"
    return "OK", f"{got['user']}'s server ran as job {job} on {got.get('host')} with {seen}; a cell ran in its kernel", job


def notebook_check(cluster: Cluster, run, ctl: str, wait: int) -> Check | None:
    """The check, or None where the spec has no hub (nothing to check)."""
    node, user = hub_node(cluster), cluster.first_user()
    if node is None or cluster.spec.software is None:
        return None
    if user is None:
        return Check(NAME, "SKIPPED", "the spec has no user to start a server as")
    if wait <= 0:
        return Check(NAME, "SKIPPED", "not run: the job phase's bound was reached")
    try:
        proc = run(node.name, command(cluster, user, wait), timeout=wait + 60)
        status, detail, job = judge(proc.stdout, options(cluster))
        if job is not None:  # stopped: its job must end (batchspawner's scancel)
            gone = run(ctl, f"for i in $(seq {GONE_S}); do [ -z \"$(squeue -h -j {int(job)} 2>/dev/null)\" ] && exit 0; "
                            f"sleep 1; done; exit 1", timeout=GONE_S + 30)
            if gone.returncode != 0:
                return Check(NAME, "FAIL", f"{detail}; but job {job} was still there {GONE_S} s after the stop")
            if status == "OK":
                detail += f"; stopped, job {job} ended"
        return Check(NAME, status, detail)
    except CorralError as exc:
        return Check(NAME, "FAIL", error_text(exc))
