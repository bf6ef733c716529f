"""EMULATED on the virtual cluster: NVIDIA's CUDA toolkit (`nvidia.cuda_toolkit`). The offline virtual nodes
cannot reach NVIDIA's CUDA repository, and their GPUs are emulated (virtual/gpu.py), so a spec asking for the
toolkit gets a clearly named stand-in in corral's on-the-fly repository instead: `cuda-toolkit-X-Y` laid out
as NVIDIA's package lays it out (/usr/local/cuda-X.Y with bin/, lib64/, version.json) whose `nvcc` compiles
nothing and says it is a stand-in. The deploy installs it as it installs NVIDIA's package (one apt request,
deploy/nvidia_tools.py), and corral writes its `cuda` module where it is installed (deploy/software.py), so
`module load cuda` is proven on virtual nodes; a real cluster never sees this package.

Its version, X.Y.0-0corral.standin1, is never one of NVIDIA's file names, so a bundle resolved from NVIDIA's
repository on this host can never take it from the virtual repository's pool (bundle/resolve.py `fetch`
copies by exact file name)."""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

SUFFIX = "0corral.standin1"


def package(version: str) -> str:
    """12.4 -> cuda-toolkit-12-4 (NVIDIA's name: deploy/nvidia_tools.py `cuda_package`)."""
    return "cuda-toolkit-" + version.replace(".", "-")


def build_deb(out: Path, version: str, deb_version: str | None = None, what: str = "the virtual cluster's") -> Path:
    """The stand-in .deb for CUDA `version` (X.Y) in `out`; `deb_version` defaults to X.Y.0-SUFFIX."""
    deb_version = deb_version or f"{version}.0-{SUFFIX}"
    name = package(version)
    deb = out / f"{name}_{deb_version}_amd64.deb"
    if deb.is_file():
        return deb
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "DEBIAN").mkdir()
        (root / "DEBIAN" / "control").write_text(
            f"Package: {name}\nVersion: {deb_version}\nArchitecture: amd64\nMaintainer: corral <root@localhost>\n"
            f"Section: misc\nPriority: optional\nDescription: STAND-IN for NVIDIA's CUDA toolkit ({what})\n"
            " Installs the toolkit's layout and an nvcc that compiles nothing: the nodes' GPUs are emulated.\n")
        home = root / f"usr/local/cuda-{version}"
        (home / "bin").mkdir(parents=True)
        (home / "lib64").mkdir()
        (home / "version.json").write_text(f'{{"cuda": {{"name": "CUDA SDK (stand-in)", "version": "{version}.0"}}}}\n')
        nvcc = home / "bin/nvcc"
        nvcc.write_text("#!/bin/sh\n# STAND-IN for NVIDIA's nvcc: compiles nothing\n"
                        f"echo 'nvcc: corral stand-in (no compiler), Cuda compilation tools, release {version}, "
                        f"V{version}.0'\n")
        nvcc.chmod(0o755)
        tmp_deb = out / f".{deb.name}.partial"
        subprocess.run(["dpkg-deb", "--root-owner-group", "-b", str(root), str(tmp_deb)], check=True,
                       capture_output=True, timeout=120)
        tmp_deb.rename(deb)
    return deb


def ensure(repo: Path, version: str) -> bool:
    """The stand-in for `version` in `repo`'s pool and index; True when it was added now."""
    pool = repo / "pool"
    if any(pool.glob(f"{package(version)}_{version}.0-{SUFFIX}_amd64.deb")):
        return False
    build_deb(pool, version)
    from corral.bundle.resolve import index
    index(repo)
    return True
