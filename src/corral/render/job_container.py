"""Clean job environments (`slurm.clean_jobs`): Slurm's private-/tmp plugin, pure and keyed on the Slurm
version. Each job gets a private /tmp (a directory under BasePath, bind-mounted in the job's mount
namespace) and a fresh /dev/shm, both gone when the job ends; PrologFlags=Contain (render/slurm.py)
makes the namespace at allocation so every step and every adopted SSH session shares it.

Versions (job_container.conf(5) of each release, Slurm's release notes):
- 22.05 (Debian 12) reads AutoBasePath, BasePath and InitScript; /tmp and /dev/shm are fixed.
- 23.02 added `Dirs=` (default "/tmp,/dev/shm"): written out, so the file says what a job gets.
- 25.11 replaced the job_container plugins with namespace plugins: the same plugin is
  `NamespaceType=namespace/tmpfs` and still reads job_container.conf (26.05's manual), so only the
  slurm.conf key changes. An upgrade across 25.11 with clean jobs on is refused (spec/slurm_releases.py
  `refusal`): daemons of both releases would read one slurm.conf with one of the two keys.

The file sits beside slurm.conf on the controllers; configless slurmd fetches it. slurmd reads it only
when it starts (deploy/slurm.py restarts slurmd when it changes).

mpi.conf (with clean jobs only): Slurm's PMIx server (in slurmstepd, outside the job's namespace) keeps
a job's data in a shared-memory file under the node's /tmp (PMIx 5's gds/shmem2: Debian 13's Open MPI 5),
which the job's private /tmp hides from its tasks: `MPI_Init` fails with PMIX_ERR_FILE_OPEN_FAILURE
(openpmix issues #3019, #3839). `PMIxEnv=PMIX_MCA_gds=hash` has every task take that data over PMIx's
socket instead. slurmd reads mpi.conf at its start and at `scontrol reconfigure`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from corral.spec.slurm_releases import tmpfs_plugin

if TYPE_CHECKING:
    from corral.spec.cluster import Cluster

PATH = "/etc/slurm/job_container.conf"
MPI_PATH = "/etc/slurm/mpi.conf"
DIRS_FROM = (23, 2)  # the `Dirs=` parameter
DIRS = "/tmp,/dev/shm"


def slurm_lines(cluster: Cluster, version: tuple[int, int]) -> list[str]:
    """slurm.conf's lines for clean jobs (none when slurm.clean_jobs is off)."""
    if not cluster.spec.slurm.clean_jobs:
        return []
    key, plugin = tmpfs_plugin(version)
    return ["", "# Clean jobs: a private /tmp and /dev/shm per job (job_container.conf)", f"{key}={plugin}"]


def job_container_conf(cluster: Cluster, version: tuple[int, int]) -> str | None:
    """job_container.conf for `version`; None when slurm.clean_jobs is off."""
    slurm = cluster.spec.slurm
    if not slurm.clean_jobs:
        return None
    out = [f"# Managed by corral from {cluster.path.name} (slurm.clean_jobs) — do not edit",
           f"# Slurm {version[0]}.{version[1]:02d}: each job's /tmp under BasePath, a fresh /dev/shm; removed at its end",
           "AutoBasePath=true", f"BasePath={slurm.job_tmp_path}"]
    if tuple(version) >= DIRS_FROM:
        out.append(f"Dirs={DIRS}")
    return "\n".join(out) + "\n"


def mpi_conf(cluster: Cluster) -> str | None:
    """mpi.conf: PMIx's job data by message where jobs have a private /tmp; None when slurm.clean_jobs is off."""
    if not cluster.spec.slurm.clean_jobs:
        return None
    return (f"# Managed by corral from {cluster.path.name} (slurm.clean_jobs) — do not edit\n"
            "# PMIx's shared-memory job data lives under the node's /tmp, which a job's private /tmp hides\n"
            "PMIxEnv=PMIX_MCA_gds=hash\n")
