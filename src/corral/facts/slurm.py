"""Slurm versions as Debian packages give them (`upstream_version`), the one reader of the installed
Slurm version (INSTALLED_VERSION, parse_slurm_version), and a JSON cache of hardware facts
in the state dir so a plan does not need every node reachable."""

from __future__ import annotations

import json
import os
import re
import tempfile
from dataclasses import asdict
from pathlib import Path

from debian.debian_support import Version

from corral.errors import CorralError
from corral.facts.mig import MigDevice
from corral.facts.records import NodeHW

HW_CACHE = "hw-facts.json"


def upstream_version(deb_version: str) -> str:
    """'22.05.8-4+deb12u3' -> '22.05.8'; '1:23.11.4-1.2ubuntu5' -> '23.11.4' (python-debian's parse);
    CorralError for what is not a Debian version."""
    try:
        return Version(deb_version).upstream_version or ""  # never None: Version refuses a version without one
    except ValueError:
        raise CorralError("not a Debian package version", value=deb_version[:80],
                          fix="expected dpkg's version of a package, like 1:22.05.8-4+deb12u3") from None


_SINFO_VERSION = re.compile(r"^\S*slurm\S*\s+(\d+\.\d+[\w.\-]*)\s*$")


def oldest(versions) -> str | None:
    """The oldest of upstream versions in dpkg's order (24.05.0~rc1 before 24.05.0; None for none): a node
    counts at its oldest Slurm package, so one left half-upgraded (a package whose install failed part-way)
    is still upgraded by the next apply. Upstream, not whole Debian versions: an epoch says nothing of
    Slurm's release order."""
    found = [v for v in versions if v]
    return min(found, key=Version) if found else None


# dpkg's status letters of a package that is there in some form: installed, unpacked, half-configured,
# half-installed, triggers awaited/pending ('n' not installed and 'c' config files only are not)
_PRESENT = set("iUFHWt")


def parse_slurm_version(lines: list[str]) -> str | None:
    """The oldest version of the packages dpkg-query lists ('ii  <version>'; a held one is 'hi'; one left
    unpacked by a failed install 'iU'), else `sinfo --version` ('slurm 22.05.8')."""
    found = oldest(upstream_version(parts[1]) for parts in (line.split() for line in lines)
                   if len(parts) == 2 and len(parts[0]) >= 2 and parts[0][1] in _PRESENT)
    if found:
        return found
    for line in lines:
        m = _SINFO_VERSION.match(line.strip())
        if m:
            return m.group(1)
    return None


# The one reader of the installed Slurm version (deploy/context.py, deploy/slurm_version.py,
# the upgrade's check after its install): dpkg's record of these packages (every Slurm package depends on
# slurm-wlm-basic-plugins at its own version; the oldest counts), else `sinfo --version`; parsed by
# parse_slurm_version.
VERSION_PACKAGES = ("slurm-wlm-basic-plugins", "slurmdbd", "slurmctld", "slurmd", "slurm-client")
INSTALLED_VERSION = ("dpkg-query -W -f '${db:Status-Abbrev} ${Version}\\n' " + " ".join(VERSION_PACKAGES)
                     + " 2>/dev/null; sinfo --version 2>/dev/null; true")


def installed_in(packages: dict) -> str | None:
    """The same reading from package versions read already (a deploy's snapshot, deploy/nodestate.py)."""
    return oldest(upstream_version(packages[name]) for name in VERSION_PACKAGES if packages.get(name))


# --- hardware facts cache (state dir) -----------------------------------------------------------


def hw_to_json(hw: NodeHW) -> dict:
    out = {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(hw).items()}
    for key, plain in (("mig", []), ("job_hooks", True), ("driver_loaded", ""), *((k, []) for k in NET_FIELDS)):
        if out[key] == plain:
            del out[key]  # written only when it says something: the cache stays as older corral wrote it
    return out


INT_FIELDS = ("cpus", "sockets", "cores_per_socket", "threads_per_core", "memory_mb")
GPU_FIELDS = ("gpu_cores", "gpu_links")  # absent in caches written before them
NET_FIELDS = ("rdma", "gpu_nics", "addrs")  # written when not empty (older caches: none)
LIST_FIELDS = GPU_FIELDS + NET_FIELDS


MIG_FIELDS = {"gpu": int, "profile": str, "gi": int, "ci": int, "cap_gi": int, "cap_ci": int}


def _mig_from_json(items: object) -> tuple[MigDevice, ...]:
    if not isinstance(items, list) or not all(
            isinstance(d, dict) and set(d) == set(MIG_FIELDS) and all(type(d[k]) is t for k, t in MIG_FIELDS.items())
            for d in items):
        raise ValueError(f"mig: expected a list of objects with {', '.join(MIG_FIELDS)}")
    return tuple(MigDevice(**d) for d in items)


def hw_from_json(data: object) -> NodeHW:
    mig, hooks, loaded = (), True, ""
    if isinstance(data, dict) and {"mig", "job_hooks", "driver_loaded"} & set(data):  # absent in older caches
        data = dict(data)
        mig = _mig_from_json(data.pop("mig", []))
        hooks, loaded = data.pop("job_hooks", True), data.pop("driver_loaded", "")
        if type(hooks) is not bool or type(loaded) is not str:
            raise ValueError("job_hooks: expected true or false; driver_loaded: expected a string")
    if not isinstance(data, dict) or not set(INT_FIELDS) <= set(data) or set(data) - set(INT_FIELDS + LIST_FIELDS) \
            or not all(type(data[k]) is int and data[k] >= 0 for k in INT_FIELDS) \
            or not all(isinstance(data.get(k, []), list) and all(isinstance(x, str) for x in data.get(k, []))
                       for k in LIST_FIELDS):
        raise ValueError(f"expected an object with integer fields {', '.join(INT_FIELDS)} "
                         f"(and string lists {', '.join(LIST_FIELDS)})")
    return NodeHW(**{k: data[k] for k in INT_FIELDS}, **{k: tuple(data.get(k, [])) for k in LIST_FIELDS}, mig=mig,
                  job_hooks=hooks, driver_loaded=loaded)


def load_hw_cache(state_dir: str | Path) -> dict[str, NodeHW]:
    """Cached hardware per node name; {} when there is no cache yet."""
    path = Path(state_dir) / HW_CACHE
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        raise CorralError(f"cannot read the hardware facts cache: {exc}", where=str(path),
                          fix="delete the file; corral gathers the facts again") from None
    try:
        if not isinstance(data, dict):
            raise ValueError("expected an object mapping node names to hardware")
        return {str(name): hw_from_json(hw) for name, hw in data.items()}
    except ValueError as exc:
        raise CorralError(f"invalid hardware facts cache: {exc}", where=str(path),
                          fix="delete the file; corral gathers the facts again") from None


def save_hw_cache(state_dir: str | Path, mapping: dict[str, NodeHW]) -> Path:
    """Write the cache atomically (temp file + rename in the same directory), mode 0600."""
    directory = Path(state_dir)
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    path = directory / HW_CACHE
    text = json.dumps({name: hw_to_json(mapping[name]) for name in sorted(mapping)}, indent=2) + "\n"
    fd, tmp = tempfile.mkstemp(prefix=f".{HW_CACHE}.", dir=directory)  # mkstemp creates it 0600
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o600)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path
