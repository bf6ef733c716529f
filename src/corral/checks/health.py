"""`corral health`: run corral-health (installed by apply on compute nodes) on demand, in parallel."""

from __future__ import annotations

import json

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


def run_health(cluster: Cluster, names: list[str] | None = None) -> Report:
    targets = names or [n.name for n in cluster.with_role("compute")]
    return Report(pmap(lambda n: _one(cluster, n), targets))
