"""Control-host prerequisites for the virtual cluster: tools, root, and the Debian mirror apt uses."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from corral.errors import HostToolError

# tool -> Debian package that provides it
TOOLS = {
    "systemd-nspawn": "systemd-container",
    "debootstrap": "debootstrap",
    "dpkg-scanpackages": "dpkg-dev",
    "ssh": "openssh-client",
    "ssh-keygen": "openssh-client",
    "ip": "iproute2",
    "mount": "mount",
}


def say(msg: str) -> None:
    print(f"corral: {msg}", file=sys.stderr, flush=True)


def require_root() -> None:
    if os.geteuid() != 0:
        raise HostToolError("the virtual cluster needs root (mounts, bridges, systemd-nspawn)",
                            fix="run corral as root (sudo corral virtual up)")


def _is_debian_family() -> bool:
    try:
        text = Path("/etc/os-release").read_text()
    except OSError:
        return False
    return bool(re.search(r"^(ID|ID_LIKE)=.*\b(debian|ubuntu)\b", text, re.M))


def ensure_tools(tools: dict[str, str] = TOOLS, *, install: bool = True) -> None:
    """Install missing host tools with apt (saying so), or fail with the exact command."""
    missing = sorted({pkg for tool, pkg in tools.items() if shutil.which(tool) is None})
    if not missing:
        return
    cmd = ["apt-get", "install", "-y", "--no-install-recommends", *missing]
    if not install or not _is_debian_family() or shutil.which("apt-get") is None or os.geteuid() != 0:
        raise HostToolError(f"missing host packages: {', '.join(missing)}",
                            fix=f"install them: {' '.join(cmd)} (or your distribution's equivalent)")
    say(f"installing missing host packages: {' '.join(missing)}")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for step in (["apt-get", "update", "-q"], cmd):
        proc = subprocess.run(step, env=env, capture_output=True, text=True)
        if proc.returncode != 0 and step is cmd:
            raise HostToolError(f"could not install {', '.join(missing)}: {proc.stderr.strip()[-400:]}",
                                fix=f"run: {' '.join(cmd)}")


def _sources_entries() -> list[tuple[list[str], list[str], list[str]]]:
    """(uris, suites, components) of every enabled 'deb' source of the host's apt."""
    out = []
    lists = [Path("/etc/apt/sources.list"), *sorted(Path("/etc/apt/sources.list.d").glob("*.list"))]
    for f in lists:
        if not f.is_file():
            continue
        for line in f.read_text().splitlines():
            line = re.sub(r"\[[^]]*\]", "", line.split("#", 1)[0]).split()
            if len(line) >= 4 and line[0] == "deb":
                out.append(([line[1]], [line[2]], line[3:]))
    for f in sorted(Path("/etc/apt/sources.list.d").glob("*.sources")):
        for stanza in re.split(r"\n\s*\n", f.read_text()):
            fields = {}
            for line in stanza.splitlines():
                if ":" in line and not line.startswith(("#", " ")):
                    k, v = line.split(":", 1)
                    fields[k.strip().lower()] = v.split()
            if "deb" in fields.get("types", []) and fields.get("enabled", ["yes"])[0] != "no":
                out.append((fields.get("uris", []), fields.get("suites", []), fields.get("components", [])))
    return out


def debian_mirror(suite: str = "bookworm") -> str:
    """The Debian mirror the host's apt already uses for `suite` main (override: CORRAL_DEBIAN_MIRROR)."""
    if os.environ.get("CORRAL_DEBIAN_MIRROR"):
        return os.environ["CORRAL_DEBIAN_MIRROR"]
    for uris, suites, comps in _sources_entries():
        if suite in suites and "main" in comps and uris:
            return uris[0]
    raise HostToolError(f"no Debian {suite} 'main' source in the host's apt configuration",
                        fix="set CORRAL_DEBIAN_MIRROR to a Debian mirror URL reachable from this host")


def run(cmd: list[str], *, what: str, check: bool = True, **kw) -> subprocess.CompletedProcess:
    """Run a host command; on failure raise HostToolError with its stderr tail."""
    proc = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if check and proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-8:]
        raise HostToolError(f"{what} failed (rc={proc.returncode}): {' | '.join(tail)}",
                            fix=f"run it by hand to see more: {' '.join(cmd)}")
    return proc
