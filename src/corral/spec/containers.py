"""Spec of the container stack for Slurm jobs: enroot (unprivileged container runtime) and pyxis
(its SPANK plugin: `srun --container-image=...`). See docs/components/containers.md."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, field_validator

from corral.spec.models_base import DebUrl, SourceUrl, Strict, Sums, check_sums
from corral.spec.types import ConfigWord, PackageName, Sha256, ShellSafeValue

PLACEHOLDERS = ("$(id -u)", "$(id -g)")
_PATH = r"/[A-Za-z0-9._+@:,=/-]*"  # enroot evaluates its paths in a shell: no shell characters


def _check_template(path: str) -> str:
    rest = path
    for p in PLACEHOLDERS:
        rest = rest.replace(p, "")
    if "$" in rest:
        raise ValueError(f"only {' and '.join(PLACEHOLDERS)} may stand in a path (corral's prolog "
                         "creates each user's directory from it)")
    if not re.fullmatch(_PATH, rest):  # the placeholders hold a space and $(); the rest may not
        raise ValueError("an absolute path of letters, digits and . _ + @ : , = - / (enroot reads it through "
                         "a shell; only $(id -u) and $(id -g) may stand in it)")
    if "/../" in path + "/" or path.rstrip("/") in ("", "/tmp", "/run", "/var"):
        raise ValueError("must be a directory of its own, not / /tmp /run /var or a path with ..")
    return path


class EnrootSpec(Strict):
    """enroot from NVIDIA's release packages on compute nodes; /etc/enroot/enroot.conf from here."""

    version: str = Field(pattern=r"^\d+\.\d+\.\d+$", description="enroot release, e.g. 3.5.0")
    packages: list[PackageName] = Field(default=["enroot", "enroot+caps"], min_length=1,
                                description="the release's .deb packages to install")
    url: DebUrl = Field(default="https://github.com/NVIDIA/enroot/releases/download/v{version}/"
                             "{package}_{version}-1_{arch}.deb",
                     description="download URL template of each package ({version}, {package}, {arch})")
    sha256: Sums = Field(default={}, description="package -> sha256 of its .deb (checked before installing), "
                                                 "or skip")
    runtime_path: str = Field(default="/run/enroot/user-$(id -u)",
                              description="ENROOT_RUNTIME_PATH in enroot.conf; $(id -u) / $(id -g) stand for "
                                          "the job user's ids (corral's prolog creates the directory)")
    cache_path: str = Field(default="/var/lib/enroot/cache/group-$(id -g)",
                            description="ENROOT_CACHE_PATH in enroot.conf (placeholders as runtime_path)")
    # not under /tmp: a user who makes the parent first would stop the prolog making anyone's directory
    data_path: str = Field(default="/var/lib/enroot/data/user-$(id -u)",
                           description="ENROOT_DATA_PATH in enroot.conf (placeholders as runtime_path)")
    settings: dict[str, ShellSafeValue] = Field(default={}, description="more enroot.conf lines, e.g. "
                                                                     "ENROOT_SQUASH_OPTIONS: -comp lz4")

    @field_validator("runtime_path", "cache_path", "data_path")
    @classmethod
    def _template(cls, v: str) -> str:
        return _check_template(v)

    @field_validator("packages")
    @classmethod
    def _names(cls, v: list[str]) -> list[str]:
        for name in v:
            if not re.fullmatch(r"[a-z0-9][a-z0-9.+-]*", name):
                raise ValueError(f"{name!r} is not a Debian package name")
        return v

    @field_validator("sha256")
    @classmethod
    def _sums(cls, v: dict[str, str]) -> dict[str, str]:
        return check_sums(v)

    @field_validator("settings")
    @classmethod
    def _settings(cls, v: dict[str, str]) -> dict[str, str]:
        for key, value in v.items():
            if not re.fullmatch(r"ENROOT_[A-Z0-9_]{1,64}", key):
                raise ValueError(f"{key!r} is not an enroot setting (ENROOT_...)")
            if key in ("ENROOT_RUNTIME_PATH", "ENROOT_CACHE_PATH", "ENROOT_DATA_PATH"):
                raise ValueError(f"set {key} with runtime_path / cache_path / data_path")
            if "\n" in value:
                raise ValueError(f"{key}: one line only")
        return v


class PyxisSpec(Strict):
    """pyxis, built on each Slurm node against the installed Slurm, enabled in plugstack.conf."""

    version: str = Field(pattern=r"^\d+\.\d+\.\d+$", description="pyxis release, e.g. 0.20.0")
    url: SourceUrl = Field(default="https://github.com/NVIDIA/pyxis/archive/refs/tags/v{version}.tar.gz",
                           description="source tarball URL template ({version})")
    sha256: Sha256 | Literal["skip"] | None = Field(default=None, description="sha256 of the source tarball "
                                                                              "(required), or skip")
    args: dict[str, ConfigWord] = Field(default={"runtime_path": "/run/pyxis"},
                                        description="arguments of its plugstack.conf line, e.g. "
                                                    "container_scope: job")

    @field_validator("args")
    @classmethod
    def _args(cls, v: dict[str, str]) -> dict[str, str]:
        for key, value in v.items():
            if not re.fullmatch(r"[a-z_]{1,64}", key) or not re.fullmatch(r"[^\s]+", value or ""):
                raise ValueError(f"{key!r}={value!r}: pyxis arguments are name=value (name: a-z and _), no spaces")
        return v
