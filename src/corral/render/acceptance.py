"""The acceptance tools' builds, rendered (pure): the scripts that fetch gpu-burn's and nccl-tests'
sources, check them against the spec's sha256, build them with the CUDA toolkit's nvcc for the node's
GPU architecture and install them under /usr/local/lib/corral, and the mark files recording what was
built (deploy/acceptance.py compares them). A failed download, checksum or build leaves what was
installed as it was. The commands validate runs with them: checks/acceptance.py."""

from __future__ import annotations

import shlex

from corral import paths
from corral.render.containers import checksum_script
from corral.spec.gpus import gpu_model
from corral.spec.models_acceptance import BurnSpec, NcclSpec

GPU_BURN = f"{paths.GPU_BURN_DIR}/gpu_burn"
GPU_BURN_COMPARE = f"{paths.GPU_BURN_DIR}/compare.ptx"
ALL_REDUCE = f"{paths.NCCL_TESTS_DIR}/all_reduce_perf"
ALL_REDUCE_MPI = f"{paths.NCCL_TESTS_DIR}/all_reduce_perf_mpi"  # acceptance.nccl.across_nodes: one rank per GPU
GPU_BURN_MARK, NCCL_TESTS_MARK = paths.GPU_BURN_MARK, paths.NCCL_TESTS_MARK
BUILD_PACKAGES = ("curl", "ca-certificates", "make", "g++")
NCCL_PACKAGES = ("libnccl2", "libnccl-dev")
OPENMPI_PACKAGES = ("libopenmpi-dev", "openmpi-bin")  # Debian's Open MPI (PMIx: srun --mpi=pmix starts it)
DEFAULT_COMPUTE = "75"  # gpu-burn's own default (Turing): a model corral has no data for


def cuda_home(cuda_version: str) -> str:
    """Where NVIDIA's cuda-toolkit-X-Y package installs: /usr/local/cuda-X.Y."""
    return f"/usr/local/cuda-{cuda_version}"


def compute(model: str | None) -> str:
    """The GPU architecture to build for (compute capability without the dot: 90 for H100)."""
    known = gpu_model(model) if model else None
    return known.compute_cap.replace(".", "") if known else DEFAULT_COMPUTE


def _fetch(label: str, key: str, url: str, sha256: str | None) -> str:
    """Download into a temporary directory, check, unpack into "$tmp/src"."""
    q = shlex.quote
    return (f"set -eu\ntmp=$(mktemp -d /var/tmp/corral-{label}.XXXXXX); trap 'rm -rf \"$tmp\"' EXIT\n"
            f"curl -fsSL --retry 3 --max-time 600 -o \"$tmp/src.tar.gz\" {q(url)} || "
            f"{{ echo {q(f'{label}: cannot download {url}')} >&2; exit 1; }}\n{checksum_script(sha256, label, key)}"
            "mkdir \"$tmp/src\" && tar -xzf \"$tmp/src.tar.gz\" -C \"$tmp/src\" --strip-components=1\n")


def _made(label: str, what: str) -> str:
    return f"\"$tmp/build.log\" 2>&1 || {{ tail -n 20 \"$tmp/build.log\" >&2; echo '{label}: {what} failed' >&2; exit 1; }}\n"


def _mark(mark: str, text_cmd: str) -> str:
    q = shlex.quote
    return (f"install -d -m 755 {q(mark.rsplit('/', 1)[0])}\n"
            f"{text_cmd} > {q(mark + '.new')} && mv -f {q(mark + '.new')} {q(mark)}\n")


def gpu_burn_mark(b: BurnSpec, cuda_version: str, model: str | None) -> str:
    return f"gpu-burn {b.version} cuda {cuda_version} compute {compute(model)}\n"


def gpu_burn_build_script(b: BurnSpec, cuda_version: str, model: str | None) -> str:
    """gpu_burn and its compare kernel (PTX for the node's architecture), built with the toolkit's nvcc."""
    q = shlex.quote
    d = paths.GPU_BURN_DIR
    return (_fetch("gpu-burn", "acceptance.burn.sha256", b.url.format(version=b.version), b.sha256)
            + f"make -C \"$tmp/src\" CUDAPATH={q(cuda_home(cuda_version))} COMPUTE={q(compute(model))} >"
            + _made("gpu-burn", "build")
            + f"install -d -m 755 {q(d)}\n"
            f"install -m 755 \"$tmp/src/gpu_burn\" {q(GPU_BURN + '.new')}\n"
            f"install -m 644 \"$tmp/src/compare.ptx\" {q(GPU_BURN_COMPARE + '.new')}\n"
            f"mv -f {q(GPU_BURN_COMPARE + '.new')} {q(GPU_BURN_COMPARE)}\nmv -f {q(GPU_BURN + '.new')} {q(GPU_BURN)}\n"
            + _mark(GPU_BURN_MARK, f"printf 'gpu-burn %s cuda %s compute %s\\n' {q(b.version)} {q(cuda_version)} "
                                   f"{q(compute(model))}"))


MPI_MARK = {False: "", True: " mpi"}  # the MPI build too (across_nodes): said in the mark, so a change rebuilds


def nccl_tests_mark(n: NcclSpec, cuda_version: str, model: str | None, nccl_dev_version: str) -> str:
    return (f"nccl-tests {n.version} cuda {cuda_version} compute {compute(model)} nccl {nccl_dev_version}"
            f"{MPI_MARK[n.across_nodes]}\n")


def _mpi_build(make: str) -> str:
    """all_reduce_perf_mpi: the same with MPI=1 against Debian's Open MPI (its multiarch directory holds
    include/ and lib/, as nccl-tests' Makefile wants MPI_HOME), one rank per GPU across nodes."""
    return (f"{make.replace('$tmp/build', '$tmp/build-mpi')} MPI=1 "
            "MPI_HOME=\"/usr/lib/$(gcc -print-multiarch)/openmpi\" >" + _made("nccl-tests", "MPI build")
            + "if ldd \"$tmp/build-mpi/all_reduce_perf\" | grep -q 'not found'; then "
              "echo 'nccl-tests: the MPI all_reduce_perf misses a library' >&2; exit 1; fi\n"
            f"install -m 755 \"$tmp/build-mpi/all_reduce_perf\" {shlex.quote(ALL_REDUCE_MPI + '.new')}\n"
            f"mv -f {shlex.quote(ALL_REDUCE_MPI + '.new')} {shlex.quote(ALL_REDUCE_MPI)}\n")


def nccl_tests_build_script(n: NcclSpec, cuda_version: str, model: str | None) -> str:
    """all_reduce_perf alone (one process, -g N GPUs: no MPI), for the node's architecture, against the
    installed libnccl-dev; with across_nodes also its MPI build (_mpi_build); refused if a library it
    needs does not resolve."""
    q = shlex.quote
    cc = compute(model)
    gencode = f"-gencode=arch=compute_{cc},code=sm_{cc}"
    make = (f"make -C \"$tmp/src/src\" BUILDDIR=\"$tmp/build\" \"$tmp/build/all_reduce_perf\" "
            f"CUDA_HOME={q(cuda_home(cuda_version))} NCCL_HOME=/usr NVCC_GENCODE={q(gencode)}")
    return (_fetch("nccl-tests", "acceptance.nccl.sha256", n.url.format(version=n.version), n.sha256)
            + make + " >" + _made("nccl-tests", "build")
            + "if ldd \"$tmp/build/all_reduce_perf\" | grep -q 'not found'; then "
              "ldd \"$tmp/build/all_reduce_perf\" | grep 'not found' >&2; "
              "echo 'nccl-tests: all_reduce_perf misses a library' >&2; exit 1; fi\n"
            + f"install -d -m 755 {q(paths.NCCL_TESTS_DIR)}\n"
            f"install -m 755 \"$tmp/build/all_reduce_perf\" {q(ALL_REDUCE + '.new')}\n"
            f"mv -f {q(ALL_REDUCE + '.new')} {q(ALL_REDUCE)}\n"
            + (_mpi_build(make) if n.across_nodes else "")
            + _mark(NCCL_TESTS_MARK, f"printf 'nccl-tests %s cuda %s compute %s nccl %s{MPI_MARK[n.across_nodes]}\\n' "
                                     f"{q(n.version)} {q(cuda_version)} {q(cc)} "  # shell-ok: MPI_MARK is a constant
                                     f"\"$(dpkg-query -W -f='${{Version}}' libnccl-dev)\""))
