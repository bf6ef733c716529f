"""The apt pin holding every Slurm package at `slurm.version` (deploy/slurm_version.py writes it,
workflows/slurm_upgrade.py writes it before an install), and the install script of an upgrade."""

from __future__ import annotations

from corral.engine.shell import q

PIN = "/etc/apt/preferences.d/corral-slurm"
# the binary packages of Debian's slurm-wlm source (what corral installs: slurmctld, slurmd, slurmdbd,
# slurm-client, and what they pull in at the same version: slurm-wlm-basic-plugins, libslurm*, libpmi*)
PACKAGES = ("slurm-wlm", "slurm-wlm-*", "slurmctld", "slurmd", "slurmdbd", "slurm-client", "slurmrestd", "sview",
            "libslurm*", "libpmi0", "libpmi2-0", "libpmi*-dev", "libpam-slurm", "libpam-slurm-adopt")
# the installed packages the upgrade moves (dpkg-query patterns)
INSTALLED = "'slurm*' 'libslurm*' 'libpmi*' 'libpam-slurm*' sview"


def version_glob(version: str) -> str:
    """22.05 -> 22.05.* (any maintenance release); 22.05.8 -> 22.05.8-* (any Debian revision)."""
    return f"{version}.*" if version.count(".") == 1 else f"{version}-*"


def pin_text(version: str) -> str:
    return (f"# Managed by corral: Slurm stays at {version} until slurm.version changes\n"
            f"Package: {' '.join(PACKAGES)}\nPin: version {version_glob(version)}\nPin-Priority: 1001\n")


def install_script(version: str) -> str:
    """The pin, then every installed Slurm package at the pinned version (the daemons stay as the
    caller left them: a policy-rc.d of its own, where none is, keeps the package scripts from
    starting or restarting them; the caller starts them and waits)."""
    return f"""set -u
printf '%s' {q(pin_text(version))} > {PIN}.corral-new && mv -f {PIN}.corral-new {PIN} || exit 1
export DEBIAN_FRONTEND=noninteractive
apt-get update -q >/dev/null 2>&1 || {{ echo 'apt-get update failed' >&2; exit 1; }}
pkgs=$(dpkg-query -W -f '${{db:Status-Abbrev}} ${{Package}}\\n' {INSTALLED} 2>/dev/null | awk '$1 ~ /^.i/ {{print $2}}')
[ -n "$pkgs" ] || {{ echo 'no Slurm package installed' >&2; exit 1; }}
rc=/usr/sbin/policy-rc.d; mine=
[ -e $rc ] || {{ printf '#!/bin/sh\nexit 101\n' > $rc && chmod 755 $rc && mine=1; }}
apt-get install -y -q -o Dpkg::Options::=--force-confold $pkgs; status=$?
[ -n "$mine" ] && rm -f $rc
exit $status
"""
