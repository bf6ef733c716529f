"""The `software:` section: the researchers' shared software environment (deploy/software.py).

Lmod (Debian's `lmod`) on every login and compute node; a software root on shared storage whose module
tree every node sees; the module search path (MODULEPATH) login shells and batch jobs start with,
rendered into Lmod's own list of initial module directories (render/lmod.py); modulefiles corral writes
for what it installs on those nodes itself (Open MPI with Slurm's PMIx, the CUDA toolkit, the
acceptance tools); and module trees the site keeps elsewhere. Cross-field checks: spec/rules_software.py.
"""

from __future__ import annotations

from pydantic import Field

from corral.spec.models_base import Strict
from corral.spec.types import AbsPath, Duration, Hostname, UnixUser


class EasyBuildSpec(Strict):
    """EasyBuild on the software root: builds run as Slurm jobs of a software-manager user, never as root."""

    user: UnixUser = Field(default="swmanager", description="the software-manager account builds run as and "
                                                            "that owns the install tree: one of users: with a "
                                                            "Slurm account (it submits the build jobs)")
    build_node: Hostname | None = Field(default=None, description="the compute node builds run on (its local "
                                                                  "disk holds the build directories); unset: "
                                                                  "the first compute node")
    prefix: AbsPath | None = Field(default=None, description="EasyBuild's install tree (software/, modules/all, "
                                                             "sources/, easyconfigs/), under software.root; "
                                                             "unset: <software.root>/easybuild")
    robot_paths: list[AbsPath] = Field(default_factory=list, max_length=16,
                                       description="the site's easyconfig trees the robot resolves dependencies "
                                                   "from, after corral's own (<prefix>/easyconfigs, where "
                                                   "`corral software build` puts each easyconfig it builds)")
    time_limit: Duration = Field(default=7200, ge=60, le=7 * 86400,
                                 description="a build job's time limit (e.g. 2h): it is cancelled at the bound")


class SoftwareSpec(Strict):
    """Lmod and the module tree on shared storage (login and compute nodes)."""

    root: AbsPath = Field(default="/sw", description="the software root on shared storage, the same on every login "
                                                      "and compute node: it must be on a storage.mounts entry "
                                                      "that all of them mount; its `modulefiles` directory (made "
                                                      "by corral, root 0755) is on every user's MODULEPATH, for "
                                                      "software the site builds there")
    site_trees: list[AbsPath] = Field(default_factory=list, max_length=32,
                                      description="more module trees on MODULEPATH, after corral's and the root's "
                                                  "(absolute paths; a tree missing on a node is skipped there)")
    openmpi: bool = Field(default=True, description="Debian's Open MPI (openmpi-bin; libopenmpi-dev and a C "
                                                    "compiler on login nodes) with Slurm's PMIx (libpmix-dev), "
                                                    "so `srun --mpi=pmix` starts MPI programs; its module "
                                                    "`openmpi` (Lua, written by corral) sets MPI_HOME and "
                                                    "SLURM_MPI_TYPE=pmix")
    easybuild: EasyBuildSpec | None = Field(default=None, description="EasyBuild (pinned, hash-checked, in a venv "
                                                                      "on the software root) whose builds run as "
                                                                      "Slurm jobs of a software-manager user; the "
                                                                      "modules they make are on every user's "
                                                                      "MODULEPATH; unset: none")
