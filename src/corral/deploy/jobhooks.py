"""jobhooks: corral's Slurm Prolog/Epilog on compute nodes (see render/slurm.py: Prolog=, Epilog=).
Installed before the controller's slurm.conf names them, so no job ever runs a missing prolog
(a failing prolog drains the node). They keep dcgm-exporter's GPU job-mapping files and the
per-user enroot directories (node/jobdirs.py)."""

from __future__ import annotations

import json
from importlib import resources

from pyinfra import host
from pyinfra.api import deploy

from corral.deploy import operations
from corral.deploy.nodestate import Want, register
from corral.render.containers import user_dirs
from corral import paths

LIB = paths.LIB
MODULE, DIRS = f"{LIB}/jobhooks.py", f"{LIB}/jobdirs.py"
PROLOG, EPILOG = paths.PROLOG, paths.EPILOG
CONFIG = paths.JOBHOOKS_CONFIG
WANT = register(Want(paths=(LIB, MODULE, DIRS, PROLOG, EPILOG, CONFIG)))


def wrapper(hook: str) -> str:
    return (f"#!/bin/sh\n# Managed by corral: Slurm {hook.capitalize()} (see {MODULE})\n"
            f"exec /usr/bin/python3 {MODULE} {hook}\n")


def config(cluster) -> str:
    m = cluster.spec.monitoring
    data = {"gpu_job_map_dir": m.gpu_job_map_dir if m.enabled else None,
            "user_dirs": user_dirs(cluster.spec.nvidia.enroot)}
    return json.dumps(data, indent=1, sort_keys=True) + "\n"


@deploy("jobhooks")
def jobhooks() -> None:
    node, cluster = host.data.corral_node, host.data.corral_cluster
    if "compute" not in node.roles:
        return
    operations.directory(name=LIB, path=LIB, want=WANT)
    operations.managed_file(name=MODULE, path=MODULE, want=WANT,
                     content=resources.files("corral.node").joinpath("jobhooks.py").read_text())
    operations.managed_file(name=DIRS, path=DIRS, want=WANT,
                     content=resources.files("corral.node").joinpath("jobdirs.py").read_text())
    operations.managed_file(name=PROLOG, path=PROLOG, content=wrapper("prolog"), mode="755", want=WANT)
    operations.managed_file(name=EPILOG, path=EPILOG, content=wrapper("epilog"), mode="755", want=WANT)
    operations.managed_file(name=CONFIG, path=CONFIG, content=config(cluster), want=WANT)
