"""Lmod for `software:` (pure): the initial module search path and the modulefiles corral writes.

Debian's `lmod` package sets MODULEPATH in /etc/profile.d/lmod.sh for every login shell (and a batch
script started with `bash -l`), from the directories listed in /etc/lmod/modulespath that exist on the
node; it also exports BASH_ENV, so the non-login bash of a job submitted from such a shell has `module`
too, and sbatch carries MODULEPATH into the job. corral owns that list: its own tree (modules for what
it installed on this node), the software root's tree on shared storage, the site's trees, then Debian's
two defaults. The entries are typed absolute paths (spec/types.py AbsPath: no whitespace, quotes, `$`
or glob characters), so lmod.sh's unquoted `for str in $(cat ...)` reads each as one word.

Modulefiles are Lua; every value they hold goes through `lua_string`.
"""

from __future__ import annotations

import posixpath
from typing import TYPE_CHECKING

from corral import paths

if TYPE_CHECKING:
    from corral.spec.cluster import Cluster

MODULESPATH = "/etc/lmod/modulespath"  # Debian's lmod: the initial MODULEPATH, one directory a line
DEBIAN_TREES = ("/etc/lmod/modules", "/usr/share/lmod/lmod/modulefiles/")  # what Debian's file lists
TREE = paths.MODULEFILES
LMOD = ("lmod",)
MPI_RUN = ("openmpi-bin", "libpmix-dev")  # mpirun; Slurm's mpi/pmix plugin loads libpmix.so (the -dev link)
MPI_BUILD = ("libopenmpi-dev", "gcc", "libc6-dev")  # login nodes: users build MPI programs there (mpicc)
MULTIARCH = ("x86_64-linux-gnu", "aarch64-linux-gnu", "powerpc64le-linux-gnu")


def lua_string(value: str) -> str:
    """`value` as one Lua string literal."""
    escaped = (str(value).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\r", "\\r")
               .replace("\0", "\\0"))
    return f'"{escaped}"'


def root_tree(cluster: Cluster) -> str:
    """The module tree on the software root (shared storage)."""
    return posixpath.join(cluster.spec.software.root, "modulefiles")


def modulespath(cluster: Cluster) -> str:
    """/etc/lmod/modulespath: the directories of every user's initial MODULEPATH, in order."""
    sw = cluster.spec.software
    out = [f"# Managed by corral from {cluster.path.name} (software) — do not edit",
           "# Lmod's initial MODULEPATH (Debian's /etc/profile.d/lmod.sh adds each directory that exists)",
           "# corral's modules for what it installed on this node", TREE,
           "# the software root on shared storage (software.root)", root_tree(cluster)]
    if sw.easybuild is not None:
        from corral.spec.easybuild import modules_tree
        out += ["# what EasyBuild built (software.easybuild)", modules_tree(cluster)]
    if sw.site_trees:
        out += ["# the site's trees (software.site_trees)", *sw.site_trees]
    out += ["# Debian's own", *DEBIAN_TREES]
    return "\n".join(out) + "\n"


def _head(what: str) -> list[str]:
    return [f"-- Managed by corral: {what}", f"whatis({lua_string(what)})"]


def openmpi_module(version: str) -> str:
    """Debian's Open MPI (the release's openmpi-bin), started by srun through Slurm's PMIx."""
    lines = _head(f"Open MPI {version} (Debian's openmpi-bin), started by srun --mpi=pmix")
    lines += ['family("mpi")', "local home = nil",
              "for _, arch in ipairs({" + ", ".join(lua_string(a) for a in MULTIARCH) + "}) do",
              '  local dir = pathJoin("/usr/lib", arch, "openmpi")',
              "  if home == nil and isDir(dir) then home = dir end",
              "end",
              "if home ~= nil then setenv(\"MPI_HOME\", home) end",
              '-- srun starts MPI tasks through PMIx without --mpi=pmix',
              'setenv("SLURM_MPI_TYPE", "pmix")', ""]
    return "\n".join(lines)


def cuda_module(version: str, debian_home: str | None = None) -> str:
    """The CUDA toolkit NVIDIA's cuda-toolkit-X-Y package puts in /usr/local/cuda-X.Y; or Debian's
    nvidia-cuda-toolkit (`debian_home`: its CUDA_HOME; nvcc and the libraries are on the default paths already)."""
    if debian_home:
        lines = _head(f"CUDA toolkit {version} (Debian's nvidia-cuda-toolkit)")
        return "\n".join(lines + ['family("cuda")', f"setenv(\"CUDA_HOME\", {lua_string(debian_home)})", ""])
    home = f"/usr/local/cuda-{version}"
    lines = _head(f"CUDA toolkit {version} (NVIDIA's cuda-toolkit package)")
    lines += ['family("cuda")', f"local home = {lua_string(home)}", 'setenv("CUDA_HOME", home)',
              'prepend_path("PATH", pathJoin(home, "bin"))', 'prepend_path("LD_LIBRARY_PATH", pathJoin(home, "lib64"))', ""]
    return "\n".join(lines)


def apptainer_module(version: str) -> str:
    """Debian's apptainer (images.apptainer, render/apptainer.py), already on PATH: the module is what job scripts
    written for other sites load, and says what runs here."""
    lines = _head(f"Apptainer {version} (Debian's apptainer), unprivileged: apptainer run --nv gives a job its GPUs")
    lines += ['help([[apptainer pull/run docker://REGISTRY/IMAGE; in a GPU job add --nv]])', ""]
    return "\n".join(lines)


def acceptance_module(dirs: list[str]) -> str:
    """corral's acceptance tools (gpu-burn, nccl-tests' all_reduce_perf) built on this node."""
    lines = _head("corral's GPU acceptance tools (gpu_burn, all_reduce_perf)")
    lines += [f"prepend_path(\"PATH\", {lua_string(d)})" for d in dirs] + [""]
    return "\n".join(lines)
