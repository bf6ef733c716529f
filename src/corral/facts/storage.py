"""What is at a path on a node, for shared storage (deploy/storage.py: mount points and export
directories): a mounted filesystem, a directory, something else, or nothing; and (OwnedDir) the owner
and mode of a directory on shared storage (deploy/slurm_ha.py: slurmctld's shared state directory).

Whether a filesystem is mounted there is read from /proc/self/mountinfo, which never touches the
filesystem: a hung NFS server cannot hang the fact. Only a path with nothing mounted on it is stat'ed,
within `timeout` (a hung filesystem above it answers "hung"). mountinfo writes a space, tab, newline
or backslash in a mount point as an octal escape; the spec's paths have none.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from pyinfra.api import FactBase

from corral.errors import CorralError

STAT_TIMEOUT_S = 10
# mountinfo: ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPEROPTIONS
_AWK = '$5 == ENVIRON["p"] { for (i = 7; i < NF; i++) if ($i == "-") { print "M|" $(i + 1) "|" $(i + 2); break } }'


@dataclass(frozen=True)
class PathState:
    """kind: "mount" (a filesystem is mounted there: fstype, source), "dir", "other" (detail: stat's
    file type, e.g. "symbolic link"), "missing", or "hung" (stat did not answer in time)."""

    kind: str
    fstype: str = ""
    source: str = ""
    detail: str = ""

    @property
    def mounted(self) -> bool:
        return self.kind == "mount"


def parse_path_state(lines: list[str]) -> PathState:
    line = next((ln.strip() for ln in reversed(lines) if ln.strip()), "")
    kind, _, rest = line.partition("|")
    if kind == "M":
        fstype, _, source = rest.partition("|")
        return PathState("mount", fstype=fstype, source=source)
    if kind == "S":
        return PathState("dir") if rest == "directory" else PathState("other", detail=rest)
    if kind == "E" and rest.isdigit():
        return PathState("hung") if int(rest) in (124, 137) else PathState("missing")
    raise CorralError("unexpected output of the mount point check", value=line[:200],
                      fix="run `cat /proc/self/mountinfo` and `stat PATH` on the node")


class MountPoint(FactBase):
    """PathState of `path` (the command never fails)."""

    def command(self, path: str) -> str:
        p = shlex.quote(path)
        return (f"m=$(p={p} awk {shlex.quote(_AWK)} /proc/self/mountinfo | tail -n 1); "
                f"if [ -n \"$m\" ]; then echo \"$m\"; "
                f"else timeout -k 2 {STAT_TIMEOUT_S} stat -c 'S|%F' -- {p} 2>/dev/null || echo \"E|$?\"; fi")

    def process(self, output: list[str]) -> PathState:
        return parse_path_state(list(output))


@dataclass(frozen=True)
class DirOwner:
    """kind: "dir" (mode, user, group as stat prints them), "other" (detail: stat's file type),
    "missing", or "hung" (stat did not answer in time)."""

    kind: str
    mode: str = ""
    user: str = ""
    group: str = ""
    detail: str = ""


def parse_dir_owner(lines: list[str]) -> DirOwner:
    line = next((ln.strip() for ln in reversed(lines) if ln.strip()), "")
    kind, _, rest = line.partition("|")
    fields = rest.split("|")
    if kind == "S" and len(fields) == 4:
        ftype, mode, user, group = fields
        return DirOwner("dir", mode, user, group) if ftype == "directory" else DirOwner("other", detail=ftype)
    if kind == "E" and rest.isdigit():
        return DirOwner("hung") if int(rest) in (124, 137) else DirOwner("missing")
    raise CorralError("unexpected output of the directory owner check", value=line[:200],
                      fix="run `stat -c '%F %a %U %G' PATH` on the node")


class OwnedDir(FactBase):
    """DirOwner of `path`: one stat within STAT_TIMEOUT_S (a hung NFS server answers "hung"; the
    command never fails). For paths on shared storage, which the node snapshot never stat's."""

    def command(self, path: str) -> str:
        p = shlex.quote(path)
        return f"timeout -k 2 {STAT_TIMEOUT_S} stat -c 'S|%F|%a|%U|%G' -- {p} 2>/dev/null || echo \"E|$?\""

    def process(self, output: list[str]) -> DirOwner:
        return parse_dir_owner(list(output))


class CorralMountUnits(FactBase):
    """The .mount units corral wrote (their first line is render/storage.py's header), as
    {unit file name: Where=}: those the spec no longer names are unmounted and removed."""

    def command(self, unit_dir: str = "/etc/systemd/system") -> str:
        d = shlex.quote(unit_dir)
        return (f"for f in {d}/*.mount; do [ -f \"$f\" ] && head -n 1 \"$f\" | grep -qx '# Managed by corral' && "
                "echo \"U|${f##*/}|$(sed -n 's/^Where=//p' \"$f\" | head -n 1)\"; done; true")

    def process(self, output: list[str]) -> dict[str, str]:
        units = {}
        for line in output:
            kind, _, rest = line.strip().partition("|")
            if kind == "U":
                name, _, where = rest.partition("|")
                units[name] = where
        return units
