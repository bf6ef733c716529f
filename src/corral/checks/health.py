"""`corral health`: run corral-health (installed by apply on compute nodes) on demand, in parallel."""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import partial

from corral.checks.ctld_restart import restart_check
from corral.checks.result import Check, Report
from corral.paths import LIB
from corral.engine.remote import run_on
from corral.errors import CorralError
from corral.parallel import pmap
from corral.spec.cluster import Cluster

COMMAND = f"/usr/bin/python3 {LIB}/health.py --json"


def _one(cluster: Cluster, name: str) -> Check:
    try:
        proc = run_on(cluster, name, COMMAND, timeout=120)
    except CorralError as exc:
        return Check(f"health {name}", "FAIL", str(exc))
    try:
        data = json.loads(proc.stdout)
    except ValueError:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
        return Check(f"health {name}", "FAIL", f"corral-health did not run (rc={proc.returncode}): {tail[0]}; "
                     "is the cluster applied? (`corral apply`)")
    bad = [c for c in data["checks"] if c["status"] in ("FAIL", "WARN")]
    status = "FAIL" if any(c["status"] == "FAIL" for c in bad) else "WARN" if bad else "OK"
    message = "; ".join(f"{c['name']}: {c['message']}" for c in bad) or \
        f"{sum(c['status'] == 'OK' for c in data['checks'])} checks ok"
    return Check(f"health {name}", status, message,
                 {c["name"]: f"{c['status']}: {c['message']}" for c in data["checks"]})


def _controller(cluster: Cluster) -> Check:
    """slurmctld's last unclean restart and the jobs it lost (checks/ctld_restart.py), on the first controller."""
    def run(node: str, command: str, **kw):
        return run_on(cluster, node, command, **kw)
    return restart_check(run, cluster.with_role("controller")[0].name)


def run_health(cluster: Cluster, names: list[str] | None = None) -> Report:
    """The compute nodes' checks (or those of `names`) and, unless names are given, the controller's."""
    targets = names or [n.name for n in cluster.with_role("compute")]
    jobs: list[Callable[[], Check]] = [partial(_one, cluster, n) for n in targets]
    if not names and cluster.with_role("controller"):  # Slurm's role (spec rules: the scheduler's roles)
        jobs.append(lambda: _controller(cluster))
    return Report(pmap(lambda job: job(), jobs))
