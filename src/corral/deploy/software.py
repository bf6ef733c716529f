"""software: Lmod on login and compute nodes (Debian's `lmod`), their initial MODULEPATH
(/etc/lmod/modulespath, render/lmod.py), the software root's module tree on shared storage (made once,
on the node spec/shared.maker names: the NFS server's exported directory, where root is not squashed),
and modulefiles for what corral installed on the node: Open MPI with Slurm's PMIx (software.openmpi),
the CUDA toolkit (nvidia.cuda_toolkit, deploy/nvidia_tools.py), apptainer (images.apptainer,
render/apptainer.py) and the acceptance tools (deploy/acceptance.py) where those were installed. A module
corral no longer installs is removed.
Runs after those components (components/slurm.py)."""

from __future__ import annotations

from pyinfra import host
from pyinfra.api import deploy

from corral import paths
from corral.spec.nvidia_archive import TOOLKIT_HOME
from corral.components import gates
from corral.deploy import acceptance, nvidia_tools, operations
from corral.deploy.nodestate import Want, register, register_for_run
from corral.deploy.users import absent
from corral.render.apptainer import TREE_NAME as APPTAINER_MODULE, module_version, module_versions
from corral.render.lmod import (LMOD, MODULESPATH, MPI_BUILD, MPI_RUN, TREE, acceptance_module, apptainer_module,
                                cuda_module, modulespath, openmpi_module, root_tree)
from corral.spec.releases import RELEASES, release
from corral.spec.shared import maker

WANT = register(Want(paths=(MODULESPATH, TREE), packages=(*LMOD, *MPI_RUN, *MPI_BUILD)))
ACCEPTANCE = f"{TREE}/corral-acceptance/1.lua"


def modulefiles(cluster, node) -> dict[str, str]:
    """Path -> text of every modulefile corral writes on `node`: one per thing it installed there."""
    sw, out = cluster.spec.software, {}
    if sw.openmpi:
        version = release(node.os).openmpi
        out[f"{TREE}/openmpi/{version}.lua"] = openmpi_module(version)
    cuda = cluster.spec.nvidia.cuda_toolkit
    if cuda is not None and nvidia_tools.skip_reason(cluster, node, "cuda") is None:
        out[f"{TREE}/cuda/{cuda.version}.lua"] = cuda_module(
            cuda.version, TOOLKIT_HOME if cuda.source == "distribution" else None)
    if gates.apptainer(cluster, node):
        version = module_version(cluster, node.os)
        out[apptainer_path(version)] = apptainer_module(version)
    acc = cluster.spec.acceptance
    if acceptance.skip_reason(cluster, node) is None:
        dirs = [d for d, on in ((paths.GPU_BURN_DIR, acc.burn.enabled), (paths.NCCL_TESTS_DIR, acc.nccl.enabled)) if on]
        out[ACCEPTANCE] = acceptance_module(dirs)
    return out


def possible(cluster) -> list[str]:
    """Every modulefile corral may have written on a node (removed where it is no longer wanted)."""
    out = list(dict.fromkeys(f"{TREE}/openmpi/{r.openmpi}.lua" for r in RELEASES.values())) + [ACCEPTANCE]
    cuda = cluster.spec.nvidia.cuda_toolkit
    out += list(dict.fromkeys(apptainer_path(v) for v in module_versions()))
    return out + ([f"{TREE}/cuda/{cuda.version}.lua"] if cuda is not None else [])


def apptainer_path(version: str) -> str:
    return f"{TREE}/{APPTAINER_MODULE}/{version}.lua"


def packages(cluster, node) -> list[str]:
    """What the declaration gives the node (components/slurm.py `_software`), in its order."""
    from corral.components.views import by_name
    return list(by_name(cluster, "software").packages(cluster, node))


@deploy("software")
def software() -> None:
    node, cluster = host.data.corral_node, host.data.corral_cluster
    if not gates.software(cluster, node):  # the declaration's gate (components/slurm.py)
        return
    if gates.software_maker(cluster, node):
        _, directory = maker(cluster, root_tree(cluster))
        want = register_for_run(Want(paths=(directory,)))
        operations.directory(name=f"module tree on the software root ({root_tree(cluster)})", path=directory, want=want)
    if not gates.software_user(cluster, node):
        return
    operations.packages(name="Lmod" + (", Open MPI and PMIx" if cluster.spec.software.openmpi else ""),
                        names=packages(cluster, node), want=WANT, together=True)
    operations.managed_file(name="MODULEPATH of login shells and jobs", path=MODULESPATH,
                            content=modulespath(cluster), want=WANT)
    files = modulefiles(cluster, node)
    stale = [p for p in possible(cluster) if p not in files]
    want = register_for_run(Want(paths=(*files, *stale, *{p.rsplit("/", 1)[0] for p in files})))
    operations.directory(name=TREE, path=TREE, want=WANT)
    for path, text in files.items():
        operations.directory(name=path.rsplit("/", 1)[0], path=path.rsplit("/", 1)[0], want=want)
        operations.managed_file(name=path, path=path, content=text, want=want)
    absent(name="modules of what corral no longer installs here", paths=stale, want=want, what="stale modules")
