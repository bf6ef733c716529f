"""MIG (Multi-Instance GPU) layouts in the spec, and what each GPU model allows (data).

`gpus.mig` on a node group: a list of {gpus: which GPU indices, profiles: the MIG devices each of
those GPUs is split into}. GPUs no entry names run with MIG disabled (whole GPUs). Unset: corral
does not manage MIG on those nodes.
"""

from __future__ import annotations

import re

from pydantic import Field, field_validator

from corral.spec.models_base import DebUrl, Strict, Sums, check_sums
from corral.spec.types import PackageName

PROFILE = re.compile(r"(\d)g\.(\d+)gb(\+me)?")  # whole-string matches only (fullmatch)

# model -> (compute slices per GPU, profiles), for the model's memory size in spec/gpus.py
MIG_PROFILES: dict[str, tuple[int, frozenset[str]]] = {
    "a30": (4, frozenset({"1g.6gb", "1g.6gb+me", "2g.12gb", "2g.12gb+me", "4g.24gb"})),
    "a100": (7, frozenset({"1g.10gb", "1g.10gb+me", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"})),
    "h100": (7, frozenset({"1g.10gb", "1g.10gb+me", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"})),
    "h200": (7, frozenset({"1g.18gb", "1g.18gb+me", "1g.35gb", "2g.35gb", "3g.71gb", "4g.71gb", "7g.141gb"})),
    "b200": (7, frozenset({"1g.23gb", "1g.23gb+me", "1g.45gb", "2g.45gb", "3g.90gb", "4g.90gb", "7g.180gb"})),
}
NO_MIG = ("v100", "t4", "a10", "l4", "l40s")  # known models without MIG


class MigGroupSpec(Strict):
    """`profiles` on each GPU of `gpus` ("all", "0-3", "0,2,4-5"); an empty list: MIG disabled."""

    gpus: str = Field(default="all", pattern=r"^(all|\d+(-\d+)?(,\d+(-\d+)?)*)$",
                      description="which GPUs of the node, by index: all, 0-3 or 0,2,4-5")
    profiles: list[str] = Field(max_length=7, description="the MIG devices each of those GPUs is split into "
                                                          "(1g.10gb, 3g.40gb, ...); empty: MIG disabled")

    @field_validator("profiles")
    @classmethod
    def _profiles(cls, v: list[str]) -> list[str]:
        for p in v:
            if not PROFILE.fullmatch(p):
                raise ValueError(f"{p!r} is not a MIG profile name (like 1g.10gb, 3g.40gb, 1g.10gb+me)")
        return v


def indices(expr: str, count: int) -> list[int]:
    """'all' | '0-3' | '0,2,4-5' -> GPU indices (ValueError beyond `count`)."""
    if expr == "all":
        return list(range(count))
    out: list[int] = []
    for part in expr.split(","):
        lo, _, hi = part.partition("-")
        out.extend(range(int(lo), int(hi or lo) + 1))
    bad = [i for i in out if i >= count]
    if bad:
        raise ValueError(f"GPU {bad[0]} does not exist (the node has {count}: 0-{count - 1})")
    return out


def layout(gpus) -> dict[int, list[str]] | None:
    """GPU index -> its MIG profiles (sorted; [] = MIG disabled), for a node's GpuSpec; None: unmanaged."""
    if gpus is None or gpus.mig is None:
        return None
    out: dict[int, list[str]] = {i: [] for i in range(gpus.count)}
    for group in gpus.mig:
        for i in indices(group.gpus, gpus.count):
            out[i] = sorted(group.profiles, key=profile_key)
    return out


def profile_key(profile: str) -> tuple[int, str]:
    m = PROFILE.fullmatch(profile)
    return (-int(m.group(1)) if m else 0, profile)


def slices(profile: str) -> int:
    m = PROFILE.fullmatch(profile)
    return int(m.group(1)) if m else 0


def problems(gpus) -> list[tuple[str, str, str]]:
    """(what, value, fix) for each problem of a node's MIG layout against its GPU model."""
    out: list[tuple[str, str, str]] = []
    if gpus is None or gpus.mig is None:
        return out
    if gpus.model in NO_MIG:
        return [(f"{gpus.model} GPUs have no MIG", gpus.model, "remove gpus.mig (MIG: A30, A100, H100, H200, B200)")]
    seen: dict[int, int] = {}
    for gi, group in enumerate(gpus.mig):
        try:
            for i in indices(group.gpus, gpus.count):
                if i in seen:
                    out.append((f"GPU {i} is in MIG entries {seen[i]} and {gi}", group.gpus, "name each GPU once"))
                seen.setdefault(i, gi)
        except ValueError as e:
            out.append((str(e), group.gpus, "name GPUs of this node (indices from 0)"))
        known = MIG_PROFILES.get(gpus.model)
        if known and gpus.memory_gib is None:
            for p in group.profiles:
                if p not in known[1]:
                    out.append((f"{p} is not a MIG profile of {gpus.model}", p,
                                f"use one of: {', '.join(sorted(known[1], key=profile_key))}"))
        limit = known[0] if known else 7
        used = sum(slices(p) for p in group.profiles)
        if used > limit:
            out.append((f"MIG profiles use {used} compute slices, a {gpus.model} GPU has {limit}",
                        "+".join(group.profiles), "use fewer or smaller MIG devices per GPU"))
    return out


class MigPartedSpec(Strict):
    """nvidia-mig-parted (NVIDIA's nvidia-mig-manager package) on nodes with a MIG layout."""

    version: str = Field(default="0.12.2", pattern=r"^\d+\.\d+\.\d+$", description="mig-parted release")
    packages: list[PackageName] = Field(default=["nvidia-mig-manager"], min_length=1,
                                description="the release's .deb packages to install")
    url: DebUrl = Field(default="https://github.com/NVIDIA/mig-parted/releases/download/v{version}/"
                             "{package}_{version}-1_{arch}.deb",
                     description="download URL template of each package ({version}, {package}, {arch})")
    sha256: Sums = Field(default={}, description="package -> sha256 of its .deb, or skip")

    @field_validator("sha256")
    @classmethod
    def _sums(cls, v: dict[str, str]) -> dict[str, str]:
        return check_sums(v)


def spec_gres(gpus) -> dict[str, int]:
    """GRES type -> count the spec means for a node: whole GPUs of its model, MIG devices by profile."""
    if gpus is None:
        return {}
    lay = layout(gpus)
    if lay is None:
        return {gpus.model: gpus.count}
    whole = sum(1 for p in lay.values() if not p)
    out = {gpus.model: whole} if whole else {}
    for profiles in lay.values():
        for p in profiles:
            out[p] = out.get(p, 0) + 1
    return out
