"""The OS releases corral's nodes run (spec `nodes[].os`), as data: one row per release.

A row says what differs between releases for corral: the distribution and its codename (the virtual
cluster's base image and package repository are built per Debian suite), the package family, the Slurm
major release the release's own archive gives (what `slurm.version` may ask for on those nodes without
another repository), and the package names, paths and unit behaviour that moved. Everything not named
here is the same on every release. `live` says whether corral's tests run the release on a live
(virtual) node: Debian 12 and 13 do; the Ubuntu and Rocky rows are written from the vendors' package
lists (each datum's source beside it) and tested offline only, which spec check, doctor and the docs say.
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
    suite: str             # the codename: debootstrap's suite, the repositories' Codename (Rocky: its platform)
    version: str           # VERSION_ID of /etc/os-release (Rocky's carries a minor: 9.6 is rocky-9)
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
    # sssd.conf's mode: trixie's sssd.service runs `chmod -R g+r /etc/sssd` at every start (still root:root),
    # so 0600 would be undone by each start and put back by each apply
    sssd_conf_mode: str = "600"
    renamed: Mapping[str, str] = field(default_factory=dict)  # corral's package name -> this release's
    slurm_more: Mapping[str, SlurmFrom] = field(default_factory=dict)  # newer Slurm majors for its nodes
    distro: str = "debian"  # ID of /etc/os-release
    family: str = "apt"     # how its packages install: apt (corral's package steps) or dnf (none yet)
    live: bool = False      # corral's tests run it on a live (virtual) node

    def package(self, name: str) -> str:
        """The release's name of a package corral names by its Debian 12 name."""
        return self.renamed.get(name, name)


RELEASES: Mapping[str, Release] = MappingProxyType({r.name: r for r in (
    Release(name="debian-12", suite="bookworm", version="12", slurm="22.05", slurm_package="22.05.8-4+deb12u3",
            systemd=252, pam_module_dir="/lib/security", security_suite="bookworm-security", openmpi="4.1",
            python="3.11", live=True),
    Release(name="debian-13", suite="trixie", version="13", slurm="24.11", slurm_package="24.11.5-4+deb13u1",
            systemd=257, pam_module_dir="/usr/lib/x86_64-linux-gnu/security", security_suite="trixie-security", openmpi="5.0",
            python="3.13",
            slurm_notify=True, sssd_conf_mode="640",
            # Debian unstable's 26.05.5 binaries install on trixie but for two libraries: libllhttp9.4 (a new
            # soname, from unstable) and libhwloc15 >= 2.15 (slurmd's shlibs line; trixie has 2.12 under the
            # same soname, and unstable's 2.15 pulls a libxml2 transition): slurmd's line is relaxed to 2.12
            slurm_more={"26.05": SlurmFrom(
                version="26.05.5-1", suite="unstable",
                # every slurm-wlm binary a component may install (slurm.rest: slurmrestd, the JWT plugin)
                packages=("slurmctld", "slurmd", "slurmdbd", "slurm-client", "slurm-wlm-basic-plugins",
                          "slurm-wlm-mysql-plugin", "libpam-slurm-adopt", "libslurm45t64", "libpmi0t64",
                          "libpmi2-0t64", "slurmrestd", "slurm-wlm-jwt-plugin"),
                libraries=("libllhttp9.4",),
                relaxed={"slurmd": ("libhwloc15 (>= 2.15.0)", "libhwloc15 (>= 2.12.0)")})},
            live=True),
    # Ubuntu: http://archive.ubuntu.com/ubuntu <suite>{,-updates} main universe, read with apt against the
    # archive's signed indexes (2026-12-06). slurm-wlm is Debian's source package: the same binary names
    # as Debian's (every package corral's components name has a candidate there:
    # tests/fixtures/releases/<name>.candidates), /etc/slurm, pam_slurm_adopt.so at /lib/security
    # (libpam-slurm-adopt's file list), units from slurmd's .deb (Type=simple -D in 21.08, notify in 23.11)
    Release(name="ubuntu-22.04", distro="ubuntu", suite="jammy", version="22.04", slurm="21.08",
            slurm_package="21.08.5-2ubuntu1",  # jammy universe (libslurm37)
            systemd=249,                       # 249.11-0ubuntu3.23 (jammy-updates)
            pam_module_dir="/lib/security", security_suite="jammy-security",
            openmpi="4.1",                     # openmpi-bin 4.1.2-2ubuntu1
            python="3.10"),                    # python3 3.10.6-1~22.04.1
    Release(name="ubuntu-24.04", distro="ubuntu", suite="noble", version="24.04", slurm="23.11",
            slurm_package="23.11.4-1.2ubuntu5",  # noble universe (libslurm40t64)
            systemd=255,                         # 255.4-1ubuntu8.19 (noble-updates)
            pam_module_dir="/lib/security", security_suite="noble-security",
            openmpi="4.1",                       # openmpi-bin 4.1.6-7ubuntu2
            python="3.12",                       # python3 3.12.3-0ubuntu2.1
            slurm_notify=True),                  # slurmd.service: Type=notify, ExecStart=... --systemd
    # Rocky 9: Slurm from EPEL 9, 22.05.9-1.el9 (https://packages.fedoraproject.org/pkgs/slurm/slurm-doc/
    # epel-9.html, slurm-perlapi/epel-9.html: "Fedora EPEL 9 22.05.9-1.el9"), its sub-packages named as
    # Fedora's slurm.spec names them; systemd 252 (RHEL 9); PAM modules in %{_libdir}/security (Fedora's
    # layout, not checked against EPEL 9's file list here); Open MPI 4.1 (RHEL 9 AppStream, not checked
    # here); units slurm{d,ctld,dbd}.service and /etc/slurm as on Debian (Fedora's packages, per
    # https://web-docs.gsi.de/~vpenso/notes/posts/hpc/cluster/slurm/rpm-packages.html).
    # corral has no dnf package step: spec check refuses these nodes (spec/rules_os.py).
    Release(name="rocky-9", distro="rocky", suite="el9", version="9", slurm="22.05", slurm_package="22.05.9-1.el9",
            systemd=252, pam_module_dir="/usr/lib64/security", security_suite="", openmpi="4.1", python="3.9",
            family="dnf",
            renamed={"slurmctld": "slurm-slurmctld", "slurmd": "slurm-slurmd", "slurmdbd": "slurm-slurmdbd",
                     "slurm-client": "slurm", "libpam-slurm-adopt": "slurm-pam_slurm", "libslurm-dev": "slurm-devel",
                     "nfs-common": "nfs-utils", "nfs-kernel-server": "nfs-utils", "python3-venv": "python3",
                     # RHEL 9's BaseOS/AppStream names (the other Debian names are not checked against Rocky's)
                     "g++": "gcc-c++", "libc6-dev": "glibc-devel", "openmpi-bin": "openmpi",
                     "libopenmpi-dev": "openmpi-devel"}),
)})
DEFAULT = "debian-12"  # every spec without `os:` (unchanged behaviour)


def release(name: str | None) -> Release:
    """The row of `name` (None: the default release); KeyError for a release corral does not know."""
    return RELEASES[name or DEFAULT]


def from_os_release(os_id: str, version_id: str) -> Release | None:
    """The row of a node's /etc/os-release (ID, VERSION_ID): ('debian', '13') -> debian-13, ('rocky', '9.6')
    -> rocky-9 (a row without a minor takes every minor); None for a release with no row."""
    for r in RELEASES.values():
        if r.distro == os_id and r.version == (version_id if "." in r.version else version_id.split(".")[0]):
            return r
    return None


def deployable(rel: Release) -> bool:
    """Whether corral's deploy can install the release's packages (its steps are apt's)."""
    return rel.family == "apt"


def virtual_ok(rel: Release) -> bool:
    """Whether the virtual cluster can build its nodes (it debootstraps Debian suites only)."""
    return rel.distro == "debian"


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
