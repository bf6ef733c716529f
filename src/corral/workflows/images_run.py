"""`corral images pull/list/rm` against the cluster: each step one bounded command, as root, on the first
login node (Slurm's commands) or the node that writes the directory (images_place.py says why). Every function returns the verdict object the CLI
prints; `run` is engine/remote.run_on (a test passes its own)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from corral.errors import CorralError
from corral.spec.cluster import Cluster
from corral.spec.image_ref import parse as parse_ref
from corral.workflows import images_place as place
from corral.workflows import images_store as store
from corral.workflows.images_pull import Pull, parse

PULL_WAIT_S = 1800  # the job's bound (pull, unpack, mksquashfs): a 20 GB image on a busy node
LIST_WAIT_S = 600   # a sha256 of every image
STEP_S = 60         # submit-side bookkeeping: cleanup, place, rm


def _default_run() -> Callable:
    from corral.engine.remote import run_on
    return run_on


def pull(cluster: Cluster, text: str, to: str | None, *, wait: int = PULL_WAIT_S, run: Callable | None = None) -> dict:
    ref = parse_ref(text)  # a UsageError before anything is reached
    directory = place.image_dir(cluster, to)
    place.needs_podman(cluster)
    node, run = place.login_node(cluster), run or _default_run()
    maker, maker_dir = place.writer(cluster, directory)
    p = Pull(ref, directory, maker_dir, place.squashed_owner(cluster, directory))
    result: dict[str, Any] = {"ok": False, "error": None, "ref": str(ref), "name": p.name, "path": p.final, "node": node,
              "writer": maker, "job": None, "built_on": None}
    submitted = done = False
    try:
        ready = parse(run(cluster, maker, p.prepare_script(), timeout=STEP_S).stdout)
        if "READY" not in ready:
            result["error"] = f"{p.final} is already there: `corral images rm {p.name}` first" if "EXISTS" in ready \
                else ready.get("FAIL") or f"preparing {maker_dir} on {maker} failed"
            done = True  # nothing was made
            return result
        submitted = True
        proc = run(cluster, node, p.submit_script(wait), timeout=wait + STEP_S)
        got = parse(proc.stdout)
        result.update(job=got.get("JOB"), built_on=got.get("NODE"))
        if got.get("RC") in ("124", "137"):
            result["error"] = f"job {got.get('JOB')} did not finish within {wait} s ({got.get('STATE') or '?'}; cancelled)"
            return result
        if got.get("RC") != "0" or not {"DIGEST", "SHA256", "SIZE"} <= got.keys():
            why = got.get("FAIL") or got.get("SBATCH") or (proc.stdout + proc.stderr).strip()[-300:]
            result["error"] = f"the pull job {got.get('JOB') or ''} failed: {why}".replace("  ", " ")
            return result
        placed = parse(run(cluster, maker, p.place_script(), timeout=STEP_S, input=p.manifest_text(got)).stdout)
        if "PLACED" not in placed:
            result["error"] = f"{p.final} appeared meanwhile: kept, this pull's file removed" \
                if "EXISTS" in placed else f"writing the manifest and renaming the image on {maker} failed"
            return result
        done = True
        result.update(ok=True, digest=got["DIGEST"], size=int(got["SIZE"]), sha256=got["SHA256"])
        return result
    except CorralError as exc:
        result["error"] = str(exc)
        return result
    finally:  # a failure, a timeout, Ctrl-C: no job left running, no partial file left behind
        if not done:
            _undo(cluster, run, p, node if submitted else None, maker, result)


def _undo(cluster: Cluster, run: Callable, p: Pull, login: str | None, maker: str, result: dict) -> None:
    steps = ([(login, p.cancel_script())] if login else []) + [(maker, p.clean_script())]
    for where, script in steps:
        try:
            run(cluster, where, script, timeout=STEP_S)
        except CorralError as exc:
            result["error"] = f"{result['error']}; cleanup on {where} failed: {exc}"


def list_images(cluster: Cluster, to: str | None, *, run: Callable | None = None) -> dict:
    directory = place.image_dir(cluster, to)
    (node, maker_dir), run = place.writer(cluster, directory), run or _default_run()
    result: dict[str, Any] = {"ok": False, "error": None, "dir": directory, "node": node, "images": []}
    try:
        proc = run(cluster, node, store.list_script(maker_dir), timeout=LIST_WAIT_S)
    except CorralError as exc:
        result["error"] = str(exc)
        return result
    if proc.returncode != 0:
        result["error"] = f"listing {directory} on {node} failed (rc {proc.returncode}): {proc.stderr.strip()[-300:]}"
        return result
    result["images"] = store.images(proc.stdout, directory)
    bad = [r["name"] for r in result["images"] if r["problem"]]
    result["ok"] = not bad
    result["error"] = f"images with a problem: {', '.join(bad)}" if bad else None
    return result


def rm(cluster: Cluster, name: str, to: str | None, *, run: Callable | None = None) -> dict:
    name = place.check_name(name)
    directory = place.image_dir(cluster, to)
    node, run = place.login_node(cluster), run or _default_run()
    maker, maker_dir = place.writer(cluster, directory)
    result: dict[str, Any] = {"ok": False, "error": None, "name": name, "path": f"{directory}/{name}.sqsh", "node": node,
              "used_by": []}
    try:
        got = store.marks(run(cluster, node, store.rm_check_script(directory, name), timeout=STEP_S).stdout)
        keys = {k for k, _ in got}
        if "NONE" in keys:
            result["error"] = f"no image {name} in {directory} (`corral images list` shows them)"
        elif "NOSQUEUE" in keys or "CHECKED" not in keys:
            result["error"] = f"squeue did not answer on {node}: not removed (a job might use it)"
        elif used := sorted({w[0] for k, w in got if k == "USED" and w}):
            result["used_by"] = used
            result["error"] = f"jobs name {result['path']}: {', '.join(used)} (not removed; wait for them)"
        elif "REMOVED" in {k for k, _ in store.marks(run(cluster, maker, store.remove_script(maker_dir, name),
                                                         timeout=STEP_S).stdout)}:
            result["ok"] = True
        else:
            result["error"] = f"removing {result['path']} on {node} failed"
    except CorralError as exc:
        result["error"] = str(exc)
    return result
