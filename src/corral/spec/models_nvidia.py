"""The `nvidia:` section of the spec: driver and its rollout, DCGM, CUDA, the container stack, MIG
(docs/components/nvidia.md, containers.md; render/nvidia.py, deploy/nvidia_*.py)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from corral.spec.containers import EnrootSpec, PyxisSpec
from corral.spec.mig import MigPartedSpec
from corral.spec.models_base import Strict
from corral.spec.models_monitoring import APT_VERSION, PACKAGE
from corral.spec.types import Fingerprint, Url

CUDA_REPO = "https://developer.download.nvidia.com/compute/cuda/repos"


class DriverSpec(Strict):
    """The NVIDIA driver corral installs, pins and rolls out (docs/components/nvidia.md)."""

    version: str | None = Field(default=None, pattern=r"^\d+(\.\d+){1,3}$",
                                description="upstream driver version, e.g. 550.127.05; or give `branch`")
    branch: str | None = Field(default=None, pattern=r"^\d{3,4}$",
                               description="a driver branch, e.g. 580, instead of `version`: resolved at plan time to "
                                           "the nodes' installed driver on that branch, else the newest of the branch "
                                           "in the configured source; the run pins it")
    kernel_modules: Literal["auto", "open", "proprietary"] = Field(
        default="auto", description="which kernel modules; auto: open for Turing and newer GPUs")
    source: Literal["distribution", "cuda"] = Field(
        default="cuda", description="the release's own archive (distribution: Ubuntu's server packages, Debian 13's non-free) or NVIDIA's CUDA repository")
    package: str | None = Field(default=None, pattern=PACKAGE,
                                description="the driver package's name, instead of the one corral picks")
    repo_url: Url = Field(default=CUDA_REPO, description="NVIDIA's CUDA repository")
    repo_fingerprint: Fingerprint | None = Field(default=None, pattern=r"^[0-9A-Fa-f]{40}$",
                                         description="the 40-hex-digit fingerprint of the key that signs "
                                                     "repo_url (a site's mirror signed with its own key); unset: "
                                                     "NVIDIA's CUDA key of the node's suite (debian12: "
                                                     "EB693B3035CD5710E231E123A4B469963BF863CC)")

    @model_validator(mode="after")
    def _version_or_branch(self) -> DriverSpec:
        if self.version is None and self.branch is None:
            raise ValueError("nvidia.driver needs `version` (e.g. 550.163.01) or `branch` (e.g. \"550\")")
        if self.version is not None and self.branch is not None and self.version.split(".")[0] != self.branch:
            raise ValueError(f"nvidia.driver.version {self.version} is not on branch {self.branch}")
        return self


class RolloutSpec(Strict):
    """Deprecated: the rollout policy moved to the top-level `rollout:` (it covers every change that
    drains or reboots nodes). Values set here are used there, with a warning."""

    parallel: int | None = Field(default=None, ge=1, le=64, description="deprecated: rollout.batch")
    drain_timeout_s: int | None = Field(default=None, ge=0, le=7 * 86400, description="deprecated: "
                                                                                      "rollout.drain_timeout")
    reboot_timeout_s: int | None = Field(default=None, ge=30, le=7200, description="deprecated: "
                                                                                  "rollout.reboot_timeout")


class DcgmSpec(Strict):
    """NVIDIA DCGM (host engine `nvidia-dcgm`) on GPU compute nodes, from NVIDIA's CUDA repository."""

    enabled: bool = Field(default=True, description="install DCGM and run nvidia-dcgm on GPU compute nodes")
    package: str = Field(default="datacenter-gpu-manager-4-cuda12", pattern=PACKAGE, description="the apt package")
    version: str | None = Field(default=None, pattern=APT_VERSION,
                                description="apt version, pinned; unset: the newest")


class CudaToolkitSpec(Strict):
    """The CUDA toolkit (compilers, libraries) on compute and login nodes, once, from NVIDIA's repository."""

    version: str = Field(pattern=r"^\d+\.\d+$", description="e.g. 12.4: package cuda-toolkit-12-4")
    source: Literal["cuda", "distribution"] = Field(
        default="cuda", description="NVIDIA's CUDA repository (cuda-toolkit-X-Y in /usr/local/cuda-X.Y) or the "
                                    "release's own archive (Debian 13's nvidia-cuda-toolkit, 12.4)")


class ContainerToolkitSpec(Strict):
    """NVIDIA Container Toolkit on GPU compute nodes, its runtime configured for `engine`."""

    engine: Literal["docker", "containerd", "crio", "none"] = Field(
        default="none", description="the container engine to configure (nvidia-ctk runtime configure); "
                                    "none: toolkit only (enroot uses its hook)")
    version: str | None = Field(default=None, pattern=APT_VERSION,
                                description="apt version, pinned; unset: the newest")
    repo_url: Url = Field(default="https://nvidia.github.io/libnvidia-container",
                          description="NVIDIA's libnvidia-container repository")
    repo_fingerprint: Fingerprint | None = Field(default=None, pattern=r"^[0-9A-Fa-f]{40}$",
                                         description="the 40-hex-digit fingerprint of the key at <repo_url>/gpgkey "
                                                     "(a site's re-signed mirror); unset: NVIDIA's "
                                                     "C95B321B61E88C1809C4F759DDCAE044F796ECB0")


class NvidiaSpec(Strict):
    """NVIDIA software on the nodes; every part unset is left alone (or not installed)."""

    driver: DriverSpec | None = Field(default=None, description="unset: corral leaves the driver alone")
    rollout: RolloutSpec = Field(default=RolloutSpec(), description="deprecated: the top-level `rollout:`")
    dcgm: DcgmSpec = Field(default=DcgmSpec(), description="DCGM host engine")
    cuda_toolkit: CudaToolkitSpec | None = Field(default=None, description="unset: not installed")
    container_toolkit: ContainerToolkitSpec | None = Field(default=None, description="unset: not installed")
    enroot: EnrootSpec | None = Field(default=None, description="unset: not installed (compute nodes)")
    pyxis: PyxisSpec | None = Field(default=None,
                                    description="unset: not installed (every Slurm node; needs enroot)")
    mig_parted: MigPartedSpec = Field(default=MigPartedSpec(),
                                      description="installed where a node group has gpus.mig")
