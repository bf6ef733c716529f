"""The OS releases corral's nodes run (spec `nodes[].os`), as data: one row per release.

A row says what differs between releases for corral: the Debian suite (the virtual cluster's base
image and its package repository are built per suite), the Slurm major release the suite's own
`slurm-wlm` packages give (what `slurm.version` may ask for on those nodes without another repository),
and the package names and paths that moved. Everything not named here is the same on every release.
Only releases corral's tests run on a live (virtual) node are rows; Ubuntu and Rocky are a later step.
Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType


@dataclass(frozen=True)
class SlurmFrom:
    """A Slurm major newer than a release's archive ships, and where corral gets it for that release's
    virtual nodes: Debian's binary packages of another suite at one exact version (virtual/slurm_more.py)."""
    version: str                   # the Debian version of the slurm-wlm binaries
    suite: str                     # the suite whose archive has them (unstable)
    packages: tuple[str, ...]      # the Slurm binaries corral's nodes install (names in that suite)
    libraries: tuple[str, ...] = ()  # what they need that the release lacks under that soname
    # dependencies written for the other suite's newer library than this release has at the same soname:
    # package -> (as built, what corral's repack says); the repack's version gets a +corral suffix
    relaxed: Mapping[str, tuple[str, str]] = field(default_factory=dict)


@dataclass(frozen=True)
class Release:
    name: str              # the spec's `os:` value
    suite: str             # Debian codename: debootstrap's suite, the repositories' Codename
    version: str           # VERSION_ID of /etc/os-release
    slurm: str             # the Slurm major release of the suite's slurm-wlm packages
    slurm_package: str     # that package's exact version in the suite (the proven one)
    systemd: int           # systemd major in the suite (what nspawn boots inside the node)
    pam_module_dir: str    # where libpam-slurm-adopt puts pam_slurm_adopt.so (usrmerge moved it in trixie)
    security_suite: str    # the suite of security updates on security.debian.org
    openmpi: str           # the Open MPI release (major.minor) of the suite's openmpi-bin: its module's version
    python: str            # the suite's python3 (major.minor): the notebook hub's wheels and venv are for it
    # the slurm-wlm units are Type=notify with `--systemd` (trixie): an ExecStart corral writes keeps the flag,
    # or systemd waits for a READY=1 that never comes and kills the daemon after TimeoutStartSec
    slurm_notify: bool = False
    renamed: Mapping[str, str] = field(default_factory=dict)  # corral's package name -> this release's
    slurm_more: Mapping[str, SlurmFrom] = field(default_factory=dict)  # newer Slurm majors for its nodes

    def package(self, name: str) -> str:
        """The release's name of a package corral names by its Debian 12 name."""
        return self.renamed.get(name, name)


RELEASES: Mapping[str, Release] = MappingProxyType({r.name: r for r in (
    Release(name="debian-12", suite="bookworm", version="12", slurm="22.05", slurm_package="22.05.8-4+deb12u3",
            systemd=252, pam_module_dir="/lib/security", security_suite="bookworm-security", openmpi="4.1",
            python="3.11"),
    Release(name="debian-13", suite="trixie", version="13", slurm="24.11", slurm_package="24.11.5-4+deb13u1",
            systemd=257, pam_module_dir="/usr/lib/x86_64-linux-gnu/security", security_suite="trixie-security", openmpi="5.0",
            python="3.13",
            slurm_notify=True,
            # Debian unstable's 26.05.5 binaries install on trixie but for two libraries: libllhttp9.4 (a new
            # soname, from unstable) and libhwloc15 >= 2.15 (slurmd's shlibs line; trixie has 2.12 under the
            # same soname, and unstable's 2.15 pulls a libxml2 transition): slurmd's line is relaxed to 2.12
            slurm_more={"26.05": SlurmFrom(
                version="26.05.5-1", suite="unstable",
                packages=("slurmctld", "slurmd", "slurmdbd", "slurm-client", "slurm-wlm-basic-plugins",
                          "slurm-wlm-mysql-plugin", "libpam-slurm-adopt", "libslurm45t64", "libpmi0t64",
                          "libpmi2-0t64"),
                libraries=("libllhttp9.4",),
                relaxed={"slurmd": ("libhwloc15 (>= 2.15.0)", "libhwloc15 (>= 2.12.0)")})}),
)})
DEFAULT = "debian-12"  # every spec without `os:` (unchanged behaviour)


def release(name: str | None) -> Release:
    """The row of `name` (None: the default release); KeyError for a release corral does not know."""
    return RELEASES[name or DEFAULT]


def from_os_release(os_id: str, version_id: str) -> Release | None:
    """The row of a node's /etc/os-release (ID, VERSION_ID): ('debian', '13') -> debian-13; None for a
    release with no row."""
    return RELEASES.get(f"{os_id}-{version_id}")


def by_suite(suite: str) -> Release:
    """The row of a Debian codename (bookworm, trixie)."""
    for r in RELEASES.values():
        if r.suite == suite:
            return r
    raise KeyError(suite)


def slurm_major(version: str) -> str:
    """'24.11.5' -> '24.11'."""
    a, b = version.split(".")[:2]
    return f"{int(a):02d}.{int(b):02d}"


def slurm_tuple(name: str | None) -> tuple[int, int]:
    """The Slurm major of a release as render/slurm.py's version tuple: debian-13 -> (24, 11)."""
    a, b = release(name).slurm.split(".")
    return int(a), int(b)
