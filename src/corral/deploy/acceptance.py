"""acceptance tools: what `corral validate` runs on real GPUs beyond DCGM (deployed by render/dcgm.py):
gpu-burn and nccl-tests' all_reduce_perf, built on each GPU compute node where `acceptance.burn` /
`acceptance.nccl` are enabled, with the CUDA toolkit's nvcc (nvidia.cuda_toolkit, installed by the
nvidia tools deploy just before this one) for the node's GPU architecture; nccl-tests against libnccl2
and libnccl-dev from NVIDIA's CUDA repository (pinned when `acceptance.nccl.nccl_version` is set).
Like pyxis (deploy/containers.py): a pinned source checked against the spec's sha256, a mark file
recording what was built (version, CUDA, architecture, NCCL), rebuilt when any of them changes.
Skipped, with the reason in the plan, on the virtual cluster (its nodes are offline and its GPUs
emulated); nodes without GPUs get nothing."""

from __future__ import annotations

import hashlib

from pyinfra import host
from pyinfra.api import deploy, operation

from corral.deploy import operations
from corral.deploy.installs import installs
from corral.deploy.nodestate import Want, register, snapshot
from corral.deploy.nvidia_repo import cuda_repository
from corral.engine.notes import annotate
from corral.engine.shell import sh
from corral.bundle.downloads import bundled
from corral.render.acceptance import (ALL_REDUCE, BUILD_PACKAGES, GPU_BURN, GPU_BURN_MARK, NCCL_PACKAGES, OPENMPI_PACKAGES,
                                      NCCL_TESTS_MARK, compute, gpu_burn_build_script, gpu_burn_mark,
                                      nccl_tests_build_script, nccl_tests_mark)
from corral.spec.models_acceptance import BurnSpec, NcclSpec

WANT = register(Want(paths=(GPU_BURN, GPU_BURN_MARK, ALL_REDUCE, NCCL_TESTS_MARK),
                     packages=("cuda-keyring", *BUILD_PACKAGES, *NCCL_PACKAGES, *OPENMPI_PACKAGES)))
VIRTUAL = ("virtual cluster: gpu-burn and nccl-tests are not built (the offline virtual nodes cannot "
           "download their sources, and there is no compute on emulated GPUs to measure)")


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def skip_reason(cluster, node) -> str | None:
    """Why the acceptance tools are not built on this node (None: they are; "not wanted here": no op)."""
    acc = cluster.spec.acceptance
    if not (acc.burn.enabled or acc.nccl.enabled) or not node.gpu_count or "compute" not in node.roles:
        return "not wanted here"
    if cluster.spec.virtual is not None:
        return VIRTUAL
    if cluster.spec.nvidia.cuda_toolkit is None:  # spec check refuses this; never build without nvcc
        return "nvidia.cuda_toolkit is not set: nothing to build gpu-burn and nccl-tests with"
    return None


@installs(lambda spec, cuda_version, model, **_: {GPU_BURN_MARK: gpu_burn_mark(spec, cuda_version, model)})
@operation()
def gpu_burn_build(spec: BurnSpec, cuda_version: str, model: str | None, want: Want):
    """gpu_burn in place and built from this commit with this CUDA for this architecture: nothing to do;
    else fetch, check, build, install."""
    snap = snapshot(want)
    built = (snap.files.get(GPU_BURN) or {}).get("kind") == "file"
    what = f"gpu-burn {spec.version[:12]} with CUDA {cuda_version} for compute {compute(model)}"
    if built and (snap.files.get(GPU_BURN_MARK) or {}).get("sha256") == _sha(gpu_burn_mark(spec, cuda_version, model)):
        host.noop(f"{what} built")
        return
    annotate(disruption="none", diff=f"{GPU_BURN}: {'rebuilt' if built else 'built'}: {what}\n")
    yield sh(gpu_burn_build_script(spec, cuda_version, model))


@operation()
def nccl_tests_build(spec: NcclSpec, cuda_version: str, model: str | None, want: Want):
    """all_reduce_perf in place and built from this release with this CUDA, for this architecture, against
    the installed libnccl-dev: nothing to do; else fetch, check, build, install."""
    snap = snapshot(want)
    dev = snap.packages.get("libnccl-dev")
    built = (snap.files.get(ALL_REDUCE) or {}).get("kind") == "file"
    what = f"nccl-tests {spec.version} with CUDA {cuda_version} for compute {compute(model)}"
    mark = (snap.files.get(NCCL_TESTS_MARK) or {}).get("sha256")
    if dev and built and mark == _sha(nccl_tests_mark(spec, cuda_version, model, dev)):
        host.noop(f"{what} built against NCCL {dev}")
        return
    annotate(disruption="none", diff=f"{ALL_REDUCE}: {'rebuilt' if built else 'built'}: {what} against "
                                     f"NCCL {dev or '(libnccl-dev to install)'}\n")
    yield sh(nccl_tests_build_script(spec, cuda_version, model))


@deploy("acceptance tools")
def acceptance() -> None:
    node, cluster = host.data.corral_node, host.data.corral_cluster
    reason = skip_reason(cluster, node)
    if reason == "not wanted here":
        return
    if reason:
        operations.skip(name="GPU acceptance tools", reason=reason)
        return
    acc, nv = cluster.spec.acceptance, cluster.spec.nvidia
    cuda, model = nv.cuda_toolkit.version, node.gpus.model
    operations.packages(name="acceptance build tools", names=list(BUILD_PACKAGES), want=WANT, together=True)
    if acc.burn.enabled:
        gpu_burn_build(name=f"gpu-burn {acc.burn.version[:12]}", spec=bundled(cluster, ("acceptance", "burn")),
                       cuda_version=cuda, model=model,
                       want=WANT)
    if acc.nccl.enabled:
        cuda_repository(name="NVIDIA CUDA repository", want=WANT,
                        repo_url=nv.driver.repo_url if nv.driver else "https://developer.download.nvidia.com/compute/cuda/repos")
        pin = acc.nccl.nccl_version
        operations.packages(name="NCCL (libnccl2, libnccl-dev)", want=WANT,
                            names=[f"{p}={pin}" if pin else p for p in NCCL_PACKAGES])
        if acc.nccl.across_nodes:  # the MPI build of all_reduce_perf (render/acceptance.py _mpi_build)
            operations.packages(name="Open MPI (nccl-tests across nodes)", names=list(OPENMPI_PACKAGES), want=WANT,
                                together=True)
        nccl_tests_build(name=f"nccl-tests {acc.nccl.version}", spec=bundled(cluster, ("acceptance", "nccl")),
                         cuda_version=cuda, model=model,
                         want=WANT)
