"""A parse check of corral's own slurm.conf, gres.conf, cgroup.conf and topology.conf before they are installed.

slurmctld cannot check a slurm.conf offline, and a spec value carrying a line break (or a `#`, a
backslash, a quote) can smuggle in a setting of its own: "gpu\\nPrologSlurmctld=/tmp/x.sh" would make
slurmctld run that program as root. Every line corral writes is a comment, blank, one `Key=Value`, or
(NodeName=, PartitionName=, NodeSet=, DownNodes=; gres.conf NodeName=/Name=) several `Key=Value`
words; keys are known Slurm parameters (spec/slurm_keys.py), a single-valued key appears once, and a
key that names a program Slurm runs may only name corral's own. Pure: text in, problems out.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Collection, Mapping

from corral import paths
from corral.render.slurm import EPILOG, HEALTH_PROGRAM, PROLOG, TASK_PROLOG
from corral.spec.slurm_keys import PROGRAM_KEYS, SLURM_KEYS, SLURM_LINES, SLURM_REPEATABLE


def _keys(words: str) -> frozenset[str]:
    return frozenset(w.lower() for w in words.split())


CORRAL_PROGRAMS = frozenset({PROLOG, EPILOG, TASK_PROLOG, HEALTH_PROGRAM, paths.POWER_SUSPEND, paths.POWER_RESUME,
                             paths.POWER_RESUME_FAIL})

GRES_KEYS = _keys("AutoDetect")
GRES_LINES = {k: _keys("NodeName Name Type File Cores Links Count MultipleFiles Flags AutoDetect")
              for k in ("nodename", "name")}
CGROUP_KEYS = _keys("""AllowedKmemSpace AllowedRAMSpace AllowedSwapSpace CgroupAutomount CgroupMountpoint CgroupPlugin
    CgroupReleaseAgentDir ConstrainCores ConstrainDevices ConstrainKmemSpace ConstrainRAMSpace ConstrainSwapSpace
    EnableControllers IgnoreSystemd IgnoreSystemdOnFailure MaxKmemPercent MaxRAMPercent MaxSwapPercent
    MemoryLimitEnforcement MemoryLimitThreshold MemorySwappiness MinKmemSpace MinRAMSpace SignalChildrenProcesses
    SystemdTimeout TaskAffinity""")
TOPOLOGY_LINES = {"switchname": _keys("SwitchName Nodes Switches LinkSpeed"), "blockname": _keys("BlockName Nodes")}

_KEY = re.compile(r"[A-Za-z][A-Za-z0-9]*\Z")
_ODD = set("#\\\"'`")  # a comment start, a line continuation or escape, quoting: corral writes none in a value


def _lint(text: str, name: str, single: frozenset[str], lines: Mapping[str, frozenset[str]],
          repeatable: frozenset[str] = frozenset(), programs: Collection[str] = ()) -> list[str]:
    out: list[str] = []
    seen: dict[str, int] = {}  # single-valued key (or "partitionname=x") -> first line
    for no, line in enumerate(text.split("\n"), 1):  # Slurm splits on \n only: a \r stays in the line
        where = f"{name} line {no}"
        ctl = sorted({f"{ord(c):#04x}" for c in line if unicodedata.category(c) == "Cc"})
        if ctl:
            out.append(f"{where}: control character {', '.join(ctl)}")
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        words = line.split()
        first = words[0].partition("=")[0].lower()
        allowed = lines.get(first)
        if allowed is None and len(words) > 1 and "=" in words[0]:
            out.append(f"{where}: {words[0].partition('=')[0]}= takes one value, got {len(words)} words: {line[:80]!r}")
        in_line: set[str] = set()
        for word in words:
            key, eq, value = word.partition("=")
            lkey = key.lower()
            if not eq or not _KEY.match(key):
                out.append(f"{where}: {word[:60]!r} is not Key=Value")
                continue
            if not value:
                out.append(f"{where}: {key}= has no value")
            odd = sorted(set(value) & _ODD)
            if odd:
                out.append(f"{where}: {key}= value {value[:60]!r} holds {' '.join(odd)}")
            if allowed is not None:
                if lkey not in allowed:
                    out.append(f"{where}: {key}= is not a {words[0].partition('=')[0]}= line's key")
                elif lkey in in_line:
                    out.append(f"{where}: {key}= twice on one line")
                in_line.add(lkey)
                continue
            if lkey not in single:
                out.append(f"{where}: unknown key {key}=")
            elif lkey in seen and lkey not in repeatable:
                out.append(f"{where}: {key}= again (first on line {seen[lkey]}): a single-valued key")
            seen.setdefault(lkey, no)
            if lkey in PROGRAM_KEYS and value not in programs:
                out.append(f"{where}: {key}= names {value[:60]!r}, not one of corral's programs")
        if allowed is not None and first == "partitionname" and words[0].lower() != "partitionname=default":
            entity = words[0].lower()
            if entity in seen:
                out.append(f"{where}: {words[0]} again (first on line {seen[entity]})")
            seen.setdefault(entity, no)
    return out


def lint_slurm_conf(text: str, programs: Collection[str] = CORRAL_PROGRAMS) -> list[str]:
    """Problems in a slurm.conf as corral writes it ([] when clean); `programs`: what Prolog=,
    HealthCheckProgram= and the other program keys may name."""
    return _lint(text, "slurm.conf", SLURM_KEYS, SLURM_LINES, SLURM_REPEATABLE, programs)


def lint_gres_conf(text: str) -> list[str]:
    return _lint(text, "gres.conf", GRES_KEYS, GRES_LINES)


def lint_cgroup_conf(text: str) -> list[str]:
    return _lint(text, "cgroup.conf", CGROUP_KEYS, {})


def lint_topology_conf(text: str) -> list[str]:
    return _lint(text, "topology.conf", frozenset(), TOPOLOGY_LINES)


LINTERS = {"slurm.conf": lint_slurm_conf, "gres.conf": lint_gres_conf, "cgroup.conf": lint_cgroup_conf,
           "topology.conf": lint_topology_conf}


def lint_configs(files: Mapping[str, str]) -> list[str]:
    """Problems in the files (path -> text) whose names this module knows; others are not checked."""
    return [p for path, text in files.items() if (lint := LINTERS.get(path.rsplit("/", 1)[-1]))
            for p in lint(text)]
