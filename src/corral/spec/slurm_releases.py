"""Slurm's major releases and the upgrade jumps Slurm supports (spec `slurm.version`).

Slurm's Upgrade Guide (https://slurm.schedmd.com/upgrades.html, "Compatibility Window"): "Slurm has
long supported in-place upgrades from the previous two major releases. With the change to a 6-month
cycle in 2024, Slurm 24.11 introduced compatibility with the previous three major releases." The
release notes say the same per release (24.11's: "Slurm can be upgraded from version 23.02, 23.11 or
24.05 to version 24.11 without loss of jobs or other state information"). So the window depends on
the release upgraded TO: two before 24.11, three from 24.11 on. A downgrade is never supported: the
daemons cannot read state written by a newer release. Pure: no I/O.
"""

from __future__ import annotations

# major releases in order (YY.MM of the first release); 24.05 started the 6-month cycle
RELEASES = ("20.02", "20.11", "21.08", "22.05", "23.02", "23.11", "24.05", "24.11", "25.05", "25.11", "26.05")
THREE_FROM = "24.11"  # the first release that accepts upgrades from the previous three


def parts(version: str) -> tuple[int, ...]:
    """'22.05.8' -> (22, 5, 8); '22.05' -> (22, 5)."""
    return tuple(int(p) for p in version.split(".")[:3])


def major(version: str) -> str:
    """'22.05.8' -> '22.05'."""
    a, b = parts(version)[:2]
    return f"{a:02d}.{b:02d}"


def window(target: str) -> int:
    """How many major releases back an upgrade to `target` may start from."""
    return 3 if parts(major(target)) >= parts(THREE_FROM) else 2


def matches(installed: str, requested: str) -> bool:
    """'22.05.8' satisfies '22.05' and '22.05.8'."""
    if len(parts(requested)) == 2:
        return major(installed) == major(requested)
    return parts(installed)[:3] == parts(requested)


def steps(installed: str, requested: str) -> list[str]:
    """The majors an upgrade goes through, each the farthest Slurm allows: 22.05 -> 25.05 gives
    ['23.11', '25.05']. Both must be known releases."""
    i, goal, out = RELEASES.index(major(installed)), RELEASES.index(major(requested)), []
    while i < goal:
        i = max(j for j in range(i + 1, goal + 1) if j - i <= window(RELEASES[j]))
        out.append(RELEASES[i])
    if out:
        out[-1] = requested
    return out


def refusal(node: str, installed: str, requested: str, clean_jobs: bool = False) -> tuple[str, str] | None:
    """(message, fix) when `node`, running `installed`, cannot go to `requested`; None when it can.
    `clean_jobs`: slurm.clean_jobs is on, whose slurm.conf key changes at 25.11."""
    head = f"slurm.version {requested}: {node} runs {installed}"
    if major(requested) not in RELEASES:
        return (f"{head}; {major(requested)} is not a Slurm major release corral knows ({', '.join(RELEASES)})",
                "set slurm.version to a released version")
    if parts(requested) < parts(installed)[:len(parts(requested))]:
        return (f"{head}; a downgrade: Slurm cannot read the state and database a newer release wrote",
                f"set slurm.version to {major(installed)} or later (or restore a backup taken before the upgrade)")
    if major(installed) not in RELEASES:
        return (f"{head}; {major(installed)} is older than the releases corral knows: upgrade by hand first",
                f"upgrade to {RELEASES[0]} or later by hand")
    path = steps(installed, requested)
    if len(path) > 1:
        n = window(path[0])
        chain = " -> ".join([major(installed)] + path)
        then = ", apply, then ".join(path)
        return (f"{head}; Slurm upgrades at most {n} major releases at a time ({chain})",
                f"set {then}, applying each in turn")
    if clean_jobs and _crosses_tmpfs_change(installed, requested):
        old, new = (f"{k}={v}" for k, v in (tmpfs_plugin(parts(x)[:2]) for x in (installed, requested)))
        return (f"{head} with slurm.clean_jobs; the private /tmp plugin's key changes at 25.11 ({old} -> {new}) "
                "and daemons of both releases run during the upgrade, each reading one slurm.conf",
                "set slurm.clean_jobs: false and apply the upgrade, then set it back to true and apply")
    return None


# job_container/tmpfs (slurm.clean_jobs): Slurm 25.11 replaced the job_container plugins with namespace
# plugins; namespace/tmpfs is the same plugin under a new key and still reads job_container.conf
# (NamespaceType=namespace/tmpfs; slurm.schedmd.com/namespace.html, 26.05's job_container.conf(5))
JOB_CONTAINER_GONE_IN = (25, 11)


def has_job_container(version: tuple[int, int]) -> bool:
    """Whether the Slurm release `version` (major, minor) has job_container/tmpfs."""
    return tuple(version) < JOB_CONTAINER_GONE_IN


def tmpfs_plugin(version: tuple[int, int]) -> tuple[str, str]:
    """slurm.conf's (key, plugin) for a private /tmp per job at `version`."""
    return ("JobContainerType", "job_container/tmpfs") if has_job_container(version) else \
        ("NamespaceType", "namespace/tmpfs")


def _crosses_tmpfs_change(installed: str, requested: str) -> bool:
    return has_job_container(parts(installed)[:2]) != has_job_container(parts(requested)[:2])
