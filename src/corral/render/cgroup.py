"""cgroup.conf: confine jobs to their cores, GPUs and memory."""

from __future__ import annotations

from corral.render.slurm import DEFAULT_VERSION, Version, header
from corral.spec.cluster import Cluster


def render_cgroup_conf(cluster: Cluster, *, version: Version = DEFAULT_VERSION) -> str:
    """The virtual cluster's host is cgroup v1 hybrid (v2 is impossible there) and all its nodes
    share one memory cgroup, so it gets cgroup/v1 and no RAM confinement; real clusters autodetect.
    CgroupPlugin exists from 21.08; CgroupAutomount is defunct from 23.11 (an error in the log)."""
    virtual = cluster.spec.virtual is not None
    out = header(cluster, version)
    if version >= (21, 8):
        out.append(f"CgroupPlugin={'cgroup/v1' if virtual else 'autodetect'}")
    if version < (23, 11):
        out.append("CgroupAutomount=yes")
    out += ["ConstrainCores=yes", "ConstrainDevices=yes", f"ConstrainRAMSpace={'no' if virtual else 'yes'}"]
    return "\n".join(out) + "\n"
