"""`corral software build` against the cluster (software_build.py holds its scripts): each step one bounded
command on the first login node, where the software manager stages the easyconfig and submits the job. The
function returns the verdict object the CLI prints; `run` is engine/remote.run_on (a test passes its own)."""

from __future__ import annotations

from collections.abc import Callable

from corral import workbench_wheels as ww
from corral.errors import CorralError, UsageError
from corral.spec import easybuild as eb
from corral.spec.cluster import Cluster
from corral.workflows import batch_job
from corral.workflows.software_build import Build, easyconfig, parse

STEP_S = 60  # the staging copy; the cancel on the way out
SLACK_S = 300  # beyond the job's time limit: waiting in the queue


def _default_run() -> Callable:
    from corral.engine.remote import run_on
    return run_on


def login_node(cluster: Cluster) -> str:
    """Where the manager stages and submits: the first login node (it mounts the software root)."""
    return batch_job.first_login(cluster, "software build", "the manager submits from it")


def build(cluster: Cluster, path: str, *, run: Callable | None = None, **names) -> dict:
    """`names`: Build's own (a test's token and local build directory)."""
    name, text = easyconfig(path)  # a UsageError before anything is reached
    sw = cluster.spec.software
    if sw is None or sw.easybuild is None:
        raise UsageError("the spec has no software.easybuild", fix="add software: {easybuild: {}} and apply")
    node, run = login_node(cluster), run or _default_run()
    lock = ww.lock_id(eb.python_of(cluster), ww.EASYBUILD)
    builder = eb.build_node(cluster)
    assert builder is not None  # spec/rules_easybuild.py refuses a spec without one
    b = Build(name, eb.prefix(cluster), eb.venv(cluster, lock), sw.easybuild.user, builder.name, **names)
    wait = sw.easybuild.time_limit + SLACK_S
    result = {"ok": False, "error": None, "easyconfig": b.ec, "module": None, "node": node, "user": b.user,
              "build_node": b.node, "job": None, "uid": None, "log": None, "eb_log": None}
    submitted = done = False
    try:
        staged = parse(run(cluster, node, b.stage_script(), timeout=STEP_S, input=text).stdout)
        if "STAGED" not in staged:
            result["error"] = staged.get("FAIL") or f"copying the easyconfig to {b.ec} on {node} failed"
            done = True  # no job was submitted
            return result
        submitted = True
        proc = run(cluster, node, b.submit_script(wait), timeout=wait + STEP_S)
        got = parse(proc.stdout)
        result.update(job=got.get("JOB"), module=got.get("MODULE") or None, log=b.log, uid=got.get("UID"))
        if got.get("UID") == "0":  # never: the job is the manager's (runuser); said if it ever were not
            result["error"] = f"job {got.get('JOB')} ran as root: refused"
            return result
        if got.get("RC") in ("124", "137"):
            result["error"] = f"job {got.get('JOB')} did not finish within {wait} s ({got.get('STATE') or '?'}; cancelled)"
            return result
        if got.get("RC") != "0" or got.get("EB_RC") != "0":
            why = got.get("FAIL") or got.get("SBATCH") or (proc.stdout + proc.stderr).strip()[-300:]
            result.update(eb_log=got.get("EBLOG") or None,
                          error=f"the build job {got.get('JOB') or ''} failed: {why}".replace("  ", " "))
            return result
        done = True
        result["ok"] = True
        return result
    except CorralError as exc:
        result["error"] = str(exc)
        return result
    finally:  # a failure, the bound, Ctrl-C: no build job left running (its own trap removes its directory)
        if submitted and not done:
            try:
                run(cluster, node, b.cancel_script(), timeout=STEP_S)
            except CorralError as exc:
                result["error"] = f"{result['error']}; cancelling job {b.job} on {node} failed: {exc}"
