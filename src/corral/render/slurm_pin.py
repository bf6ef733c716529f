"""The apt pin holding every Slurm package at `slurm.version`: its one text (`pin_text`), uploaded by
deploy/slurm_version.py on every Slurm node, and the script that writes it in place
(`write_script`) where no upload can happen, inside the upgrade's install (workflows/slurm_daemons.py)."""

from __future__ import annotations

import shlex

PIN = "/etc/apt/preferences.d/corral-slurm"
# the binary packages of Debian's slurm-wlm source (what corral installs: slurmctld, slurmd, slurmdbd,
# slurm-client, and what they pull in at the same version: slurm-wlm-basic-plugins, libslurm*, libpmi*)
PACKAGES = ("slurm-wlm", "slurm-wlm-*", "slurmctld", "slurmd", "slurmdbd", "slurm-client", "slurm-client-*",
            "slurmrestd", "sview", "libslurm*", "libpmi0*", "libpmi2-0*", "libpam-slurm", "libpam-slurm-adopt")
# the installed packages the upgrade moves
# (dpkg-query patterns; not `slurm*`: Debian's `slurm` is a network monitor, libpmix* is OpenPMIx's)
INSTALLED = ("'slurm-wlm*' slurmctld slurmd slurmdbd 'slurm-client*' slurmrestd sview 'libslurm*' 'libpmi0*' "
             "'libpmi2-0*' 'libpam-slurm*'")


def version_glob(version: str) -> str:
    """22.05 -> 22.05.* (any maintenance release); 22.05.8 -> 22.05.8-* (any Debian revision)."""
    return f"{version}.*" if version.count(".") == 1 else f"{version}-*"


def pin_text(version: str) -> str:
    return (f"# Managed by corral: Slurm stays at {version} until slurm.version changes\n"
            f"Package: {' '.join(PACKAGES)}\nPin: version {version_glob(version)}\nPin-Priority: 1001\n")


def write_script(version: str) -> str:
    """The pin for `version` in place, replaced whole (a reader never sees half a file)."""
    new = f"{PIN}.corral-new"
    return f"printf '%s' {shlex.quote(pin_text(version))} > {new} && mv -f {new} {PIN}"
