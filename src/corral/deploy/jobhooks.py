"""jobhooks: corral's Slurm Prolog/Epilog/TaskProlog on compute nodes (see render/slurm.py: Prolog=, Epilog=,
TaskProlog=; the TaskProlog exports the node's job environment, render/job_env.py).
Installed before the controller's slurm.conf names them, so no job ever runs a missing prolog
(a failing prolog drains the node). They keep dcgm-exporter's GPU job-mapping files and the
per-user enroot directories (node/jobdirs.py) and, with slurm.clean_jobs, end a user's leftover processes
and drain a node whose GPUs still hold processes after a job (node/jobclean.py)."""

from __future__ import annotations

import json

from pyinfra import host
from pyinfra.api import deploy

from corral.components import gates
from corral.deploy import operations
from corral.deploy.nodestate import Want, register
from corral.engine.run_context import current as run
from corral.render.containers import user_dirs
from corral.render.podman import user_dirs as podman_user_dirs
from corral.render.mig import node_gres
from corral.render.job_env import PATH as JOB_ENV, job_env_text, task_prolog
from corral.render.node_programs import node_program
from corral import paths

LIB = paths.LIB
MODULE, DIRS, CLEAN = f"{LIB}/jobhooks.py", paths.JOBDIRS, f"{LIB}/jobclean.py"
PROLOG, EPILOG, TASK_PROLOG = paths.PROLOG, paths.EPILOG, paths.TASK_PROLOG
CONFIG = paths.JOBHOOKS_CONFIG
CLEAN_GPU_SETTLE_S = 10  # how long the epilog waits for a job's GPU contexts to go before it drains
WANT = register(Want(paths=(LIB, MODULE, DIRS, CLEAN, PROLOG, EPILOG, TASK_PROLOG, CONFIG, JOB_ENV)))


def wrapper(hook: str) -> str:
    return (f"#!/bin/sh\n# Managed by corral: Slurm {hook.capitalize()} (see {MODULE})\n"
            f"exec /usr/bin/python3 {MODULE} {hook}\n")


def gpu_count(node, facts=None) -> int:
    """GPU GRES Slurm can give a job on the node (whole GPUs and MIG devices, as gres.conf has them):
    the prolog maps no index past it."""
    if node.gpus is None:
        return 0
    return max(node.gpus.count, sum(n for _, n in node_gres(node.gpus.model, node.gpus.count, facts)))


def clean_jobs(cluster, node=None) -> dict | None:
    """The epilog's part of slurm.clean_jobs (node/jobclean.py); None: off. A node that is also a login
    node keeps its users' processes (they work there without a job)."""
    if not cluster.spec.slurm.clean_jobs:
        return None
    return {"end_leftovers": node is None or "login" not in node.roles, "gpu_settle_s": CLEAN_GPU_SETTLE_S}


def config(cluster, node=None, facts=None) -> str:
    """The hooks' JSON config; without `node` no gpu_count (the prolog then counts /dev/nvidiaN)."""
    m = cluster.spec.monitoring
    data = {"gpu_job_map_dir": m.gpu_job_map_dir if m.enabled else None,
            "user_dirs": user_dirs(cluster.spec.nvidia.enroot) + podman_user_dirs(cluster)}
    if cluster.spec.slurm.clean_jobs:
        data["clean_jobs"] = clean_jobs(cluster, node)
    if node is not None:
        data["gpu_count"] = gpu_count(node, facts)
    return json.dumps(data, indent=1, sort_keys=True) + "\n"


@deploy("jobhooks")
def jobhooks() -> None:
    node, cluster = host.data.corral_node, host.data.corral_cluster
    if not gates.compute(cluster, node):  # the declaration's gate (components/slurm.py)
        return
    operations.directory(name=LIB, path=LIB, want=WANT)
    operations.managed_file(name=MODULE, path=MODULE, want=WANT,
                     content=node_program("jobhooks.py"))
    operations.managed_file(name=DIRS, path=DIRS, want=WANT,
                     content=node_program("jobdirs.py"))
    operations.managed_file(name=CLEAN, path=CLEAN, want=WANT, content=node_program("jobclean.py"))
    operations.managed_file(name=PROLOG, path=PROLOG, content=wrapper("prolog"), mode="755", want=WANT)
    operations.managed_file(name=EPILOG, path=EPILOG, content=wrapper("epilog"), mode="755", want=WANT)
    operations.managed_file(name=CONFIG, path=CONFIG, content=config(cluster, node, run().hw.get(node.name)),
                            want=WANT)
    # the job environment from this node's fabric facts (render/job_env.py) and the TaskProlog exporting it
    operations.managed_file(name=JOB_ENV, path=JOB_ENV, want=WANT,
                            content=job_env_text(cluster, node, run().hw.get(node.name)))
    operations.managed_file(name=TASK_PROLOG, path=TASK_PROLOG, content=task_prolog(), mode="755", want=WANT)
