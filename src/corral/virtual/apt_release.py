"""apt options that reach another Debian release than the control host's own, privately.

The control host runs Debian 12; a Debian 13 node's base image updates and package repository come
from trixie. The host's /etc/apt is never changed for that: a private sources list (the suite, its
-updates and its -security, signed by the host's debian-archive-keyring, which holds trixie's keys) and
a private lists directory under the cache, refreshed by `apt-get update` with the same options. The
host's own release needs none of this (its sources already serve it: no options, unchanged behaviour).
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

from corral.errors import HostToolError
from corral.spec.releases import Release
from corral.virtual.host import _sources_entries, debian_mirror, say

KEYRING = "/usr/share/keyrings/debian-archive-keyring.gpg"
REFRESH_S = 86400  # the private lists are refreshed at most daily
UPDATE_TIMEOUT_S = 600


def host_suites() -> set[str]:
    """The suites the host's apt sources already serve."""
    return {s for _, suites, _ in _sources_entries() for s in suites}


def mirrors(suite: str) -> tuple[str, str]:
    """(Debian mirror, security mirror) for a suite: the host's own for it where it has them, else
    the host's Debian mirror of any release (the same archive serves every suite); CORRAL_DEBIAN_MIRROR wins."""
    try:
        main = debian_mirror(suite)
    except HostToolError:
        main = debian_mirror("bookworm")
    security = os.environ.get("CORRAL_DEBIAN_SECURITY_MIRROR")
    if not security:
        found = [u[0] for u, suites, _ in _sources_entries() if u and any(s.endswith("-security") for s in suites)]
        security = found[0] if found else "http://security.debian.org/debian-security"
    return main, security


# main, and where NVIDIA's driver comes from (nvidia.driver.source: distribution, spec/nvidia_archive.py): non-free,
# contrib for the open kernel modules (their source is free, the firmware they load is not),
# and non-free-firmware for its GSP firmware
SECTIONS = "main contrib non-free non-free-firmware"


def sources(release: Release) -> str:
    main, security = mirrors(release.suite)
    return (f"deb [signed-by={KEYRING}] {main} {release.suite} {SECTIONS}\n"
            f"deb [signed-by={KEYRING}] {main} {release.suite}-updates {SECTIONS}\n"
            f"deb [signed-by={KEYRING}] {security} {release.security_suite} {SECTIONS}\n")


def options(release: Release, work: Path) -> list[str]:
    """apt -o options resolving against `release`'s archive only (private state under `work`), refreshed
    when older than a day; [] for a suite the host's own sources serve."""
    if release.suite in host_suites():
        return []
    return private(sources(release), work, f"debian {release.suite}")


def suite_options(suite: str, work: Path) -> list[str]:
    """The same for one suite of the archive alone (no -updates, no -security): unstable's packages."""
    main, _ = mirrors(suite)
    return private(f"deb [signed-by={KEYRING}] {main} {suite} main\n", work, f"debian {suite}")


def private(text: str, work: Path, what: str) -> list[str]:
    """apt -o options of the sources `text` with private lists under `work`, updated when it changed or is
    older than a day."""
    work = work.resolve()
    lists, parts = work / "lists", work / "sources.list.d"
    for d in (lists / "partial", parts):
        d.mkdir(parents=True, exist_ok=True)
    listfile = work / "sources.list"
    changed = not listfile.is_file() or listfile.read_text() != text
    listfile.write_text(text)
    opts = ["-o", f"Dir::Etc::sourcelist={listfile}", "-o", f"Dir::Etc::sourceparts={parts}",
            "-o", f"Dir::State::Lists={lists}", "-o", "APT::Get::List-Cleanup=0"]
    stamp = work / "updated"
    if changed or not stamp.is_file() or time.time() - stamp.stat().st_mtime > REFRESH_S:
        say(f"refreshing the private apt lists of {what} in {work}")
        proc = subprocess.run(["apt-get", "-q", "-o", "Debug::NoLocking=1", *opts, "update"],
                              capture_output=True, text=True, timeout=UPDATE_TIMEOUT_S,
                              env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"})
        if proc.returncode != 0 or "NO_PUBKEY" in proc.stderr:  # apt only warns about an unsigned suite
            tail = " | ".join(proc.stderr.strip().splitlines()[-4:])
            raise HostToolError(f"apt update of {what} (private lists) failed: {tail}",
                                fix="check that the Debian mirror is reachable (CORRAL_DEBIAN_MIRROR to choose one)")
        stamp.touch()
    return opts
