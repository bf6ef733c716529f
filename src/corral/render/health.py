"""health, declared as data (components/slurm.py): corral-health on compute nodes (Slurm's HealthCheckProgram, see
render/slurm.py): the stdlib-only program from corral/node/, a wrapper, and its config rendered from the spec."""

from __future__ import annotations

import json

from corral import paths
from corral.render import resources as r
from corral.render.node_programs import node_program
from corral.spec.shared import mounts_of

LIB = paths.LIB
MODULES = ("health.py", "health_checks.py", "health_parse.py", "health_xid.py", "health_slurm.py")
WRAPPER = paths.HEALTH
CONFIG = paths.HEALTH_CONFIG
METRICS_FILE = "/var/lib/prometheus/node-exporter/corral-health.prom"  # node-exporter's textfile directory
WRAPPER_TEXT = f"#!/bin/sh\n# Managed by corral: Slurm HealthCheckProgram\nexec /usr/bin/python3 {LIB}/health.py --slurm \"$@\"\n"


def expected_mig(gpus) -> dict[str, int] | None:
    """MIG devices per profile the spec's layout makes (None: MIG not managed here)."""
    from corral.render.mig import wanted
    want = wanted(gpus) if gpus else None
    if want is None:
        return None
    out: dict[str, int] = {}
    for profiles in want.values():
        for p in profiles:
            out[p] = out.get(p, 0) + 1
    return out


def config(cluster, node) -> str:
    h = cluster.spec.health
    data = {"node": node.name, "expected_gpus": node.gpu_count,
            "gpu_model": node.gpus.model if node.gpus else None, "max_gpu_temp_c": h.max_gpu_temp_c,
            "mounts": h.mounts, "services": ["munge", "slurmd", *h.services], "min_free_mb": h.min_free_mb,
            "timeout_s": h.timeout_s, "state_file": "/var/lib/corral/health-state.json",
            "metrics_file": METRICS_FILE if cluster.spec.monitoring.enabled and cluster.with_role("monitoring")
            else None, "expected_mig": expected_mig(node.gpus),
            "shared_mounts": {m.path: m.readonly_ok for m in mounts_of(cluster, node)}}
    return json.dumps(data, indent=1, sort_keys=True) + "\n"


def resources(cluster, node) -> list:
    return [
        r.Directory(LIB),
        *(r.File(f"{LIB}/{m}", node_program(m)) for m in MODULES),
        r.File(WRAPPER, WRAPPER_TEXT, mode="755"),
        r.File(CONFIG, config(cluster, node)),
    ]
