"""What `apt-get upgrade` would install on a node (deploy/upgrades.py, workflows/upgrade_rollout.py).

The package lists are refreshed into corral's own lists directory (LISTS), never the system's: a plan
sees the repositories' newest versions and changes nothing apt itself uses. The simulation
(`apt-get -s upgrade --with-new-pkgs --no-install-recommends`) honours apt holds and corral's pins (the
NVIDIA driver, Slurm), and plans without what apt merely recommends, as every corral install runs
(render/apt.py): the rollout installs exactly the versions planned here.
Its `Inst` lines, e.g.
  Inst libssl3 [3.0.11-1~deb12u1] (3.0.13-1~deb12u2 Debian-Security:12/stable-security [amd64])
  Inst linux-image-6.1.0-28-amd64 (6.1.119-1 Debian:12.8/stable [amd64])      (a new package)
become Upgrade records; `security` keeps those from a -security suite.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass

from pyinfra.api import FactBase

LISTS = "/var/lib/corral/apt-lists"
HOLDS = "/var/lib/corral/apt-holds"  # the holds corral made (released when the spec drops them)
REBOOT_REQUIRED = "/var/run/reboot-required"
UPDATE_TIMEOUT_S = 120
_INST = re.compile(r"Inst (?P<name>[a-z0-9][a-z0-9.+-]*)(?::\S+)? (?:\[(?P<old>[^\]]+)\] )?"
                   r"\((?P<new>\S+) (?P<origin>[^\[]*?)\s*(?:\[[^\]]*\])?\)")


@dataclass(frozen=True)
class Upgrade:
    name: str
    old: str | None  # None: a new package (a new kernel's)
    new: str
    origin: str

    @property
    def security(self) -> bool:
        return "-security" in self.origin.lower() or "security:" in self.origin.lower()


@dataclass(frozen=True)
class AptState:
    upgrades: tuple[Upgrade, ...]
    reboot_required: bool  # the node already asks for a reboot (/var/run/reboot-required)
    refresh_failed: str = ""  # apt-get update's complaint: the lists may be old


def parse_upgrades(lines: list[str]) -> AptState:
    ups, reboot, failed = [], False, ""
    for line in lines:
        line = line.rstrip()
        if line == "corral-reboot-required":
            reboot = True
        elif line.startswith("corral-update-failed "):
            failed = line.split(" ", 1)[1][:200]
        elif m := _INST.match(line):
            ups.append(Upgrade(m["name"], m["old"], m["new"], m["origin"].strip()))
    return AptState(tuple(ups), reboot, failed)


def select(state: AptState, kind: str) -> list[Upgrade]:
    """The upgrades `packages.upgrade` asks for."""
    if kind == "all":
        return list(state.upgrades)
    if kind == "security":
        return [u for u in state.upgrades if u.security]
    return []


def command() -> str:
    return (f"mkdir -p {LISTS}/partial && "
            f"{{ out=$(timeout -k 5 {UPDATE_TIMEOUT_S} apt-get update -q -o Dir::State::Lists={LISTS} 2>&1) || "
            f"echo \"corral-update-failed $(echo \"$out\" | tail -n 1)\"; }}; "
            f"apt-get -s -q -o Dir::State::Lists={LISTS} -o Debug::NoLocking=1 upgrade --with-new-pkgs --no-install-recommends 2>/dev/null "
            f"| grep '^Inst ' || true; test -e {REBOOT_REQUIRED} && echo corral-reboot-required || true")


class AptUpgrades(FactBase):
    """AptState of the node (the command never fails; no output: nothing to upgrade)."""

    def command(self) -> str:
        return command()

    @staticmethod
    def default() -> AptState:  # pyinfra's answer for an empty output
        return AptState((), False)

    def process(self, output: list[str]) -> AptState:
        return parse_upgrades(list(output))


class AptHolds(FactBase):
    """(apt's holds, the holds corral recorded, which of `names` are installed)."""

    @staticmethod
    def default() -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
        return (), (), ()

    def command(self, names: str = "") -> str:
        """names: the spec's holds, space-separated (package names have no space)."""
        installed = (f"dpkg-query -W -f '${{Package}}\\n' {' '.join(shlex.quote(n) for n in names.split())} 2>/dev/null"
                     if names else "true")
        return (f"apt-mark showhold 2>/dev/null; echo '--- corral'; cat {HOLDS} 2>/dev/null; "
                f"echo '--- installed'; {installed}; true")

    def process(self, output: list[str]) -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
        lines = [line.strip() for line in output]
        a = lines.index("--- corral") if "--- corral" in lines else len(lines)
        b = lines.index("--- installed") if "--- installed" in lines else len(lines)
        part = lambda xs: tuple(sorted({x for x in xs if x}))  # noqa: E731
        return part(lines[:a]), part(lines[a + 1:b]), part(lines[b + 1:])
