"""Pure parsers of corral-health: probe text in, plain data out (stdlib only, runs on nodes).

Formats (captures under tests/fixtures/health/, provenance in its README):
- `nvidia-smi --query-gpu=index,name,memory.total --format=csv,noheader,nounits`:
  `0, NVIDIA H100 80GB HBM3, 81559`
- `nvidia-smi -q [-d ECC,PAGE_RETIREMENT,ROW_REMAPPER]`: `GPU 00000000:18:00.0` blocks of indented
  `Key : Value` lines and section headers; field names vary by driver (`Ecc Mode` / `ECC Mode`,
  `SRAM Uncorrectable` / `SRAM Uncorrectable SEC-DED`, Volta's `Double Bit` / `Total`).
The kernel log's Xids are health_xid's (records, never text lines).
"""

from __future__ import annotations

import re

OK, WARN, FAIL, SKIPPED = "OK", "WARN", "FAIL", "SKIPPED"

# Xids that report an application's fault, not the GPU's (NVIDIA k8s-device-plugin's list).
APPLICATION_XIDS = frozenset({13, 31, 43, 45, 68})

_GPU_HEADER = re.compile(r"^\s*GPU ([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f])\s*$")
_KEY_VALUE = re.compile(r"^(\S.*?)\s+:\s?(.*)$")


def count_gpu_device_files(names) -> int:
    """How many /dev entries are GPU device files (nvidia0, nvidia1, …; not nvidiactl, nvidia-uvm)."""
    return sum(1 for n in names if re.fullmatch(r"nvidia\d+", n))


def _csv_rows(text: str):
    for line in text.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) >= 2 and parts[0].isdigit():
            yield parts


def parse_gpu_query(text: str) -> list[dict]:
    """`--query-gpu=index,name,memory.total --format=csv,noheader,nounits` -> [{index, name, memory_mib}]."""
    gpus = []
    for parts in _csv_rows(text):
        if len(parts) < 3:
            continue
        mem = parts[-1]
        gpus.append({"index": int(parts[0]), "name": ", ".join(parts[1:-1]),
                     "memory_mib": int(mem) if mem.isdigit() else None})
    return gpus


_MIG_LINE = re.compile(r"^\s+MIG\s+(\S+)\s+Device\s+\d+:")


def parse_mig_list(text: str) -> dict[str, int]:
    """`nvidia-smi -L` -> MIG devices per profile ('  MIG 3g.40gb     Device  0: (UUID: MIG-...)')."""
    out: dict[str, int] = {}
    for line in text.splitlines():
        m = _MIG_LINE.match(line)
        if m:
            out[m.group(1)] = out.get(m.group(1), 0) + 1
    return out


def parse_gpu_temps(text: str) -> dict[int, int | None]:
    """`--query-gpu=index,temperature.gpu --format=csv,noheader,nounits` -> {index: °C or None ([N/A])}."""
    return {int(p[0]): (int(p[1]) if p[1].lstrip("-").isdigit() else None) for p in _csv_rows(text)}


def model_matches(name: str, model: str | None) -> bool:
    """Does a GPU name ("NVIDIA H100 80GB HBM3") match a spec model ("h100", "a100-80gb")? h100 != h10."""
    if not model:
        return True
    head = re.split(r"[-_ ]", model.strip().lower())[0]
    return bool(re.search(rf"(?<![a-z0-9]){re.escape(head)}(?![0-9])", name.lower()))


def parse_smi_q(text: str) -> dict[str, dict[str, str]]:
    """`nvidia-smi -q` -> {bus id: {"ecc errors/volatile/dram uncorrectable": "0", ...}}, paths lower-case."""
    gpus: dict[str, dict[str, str]] = {}
    fields: dict[str, str] | None = None
    stack: list[tuple[int, str]] = []
    for raw in text.splitlines():
        if not raw.strip():
            continue
        m = _GPU_HEADER.match(raw)
        if m:
            fields, stack = gpus.setdefault(m.group(1).upper(), {}), []
            continue
        if fields is None:
            continue
        indent = len(raw) - len(raw.lstrip())
        while stack and stack[-1][0] >= indent:
            stack.pop()
        kv = _KEY_VALUE.match(raw.strip())
        name = (kv.group(1) if kv else raw.strip()).strip().lower()
        path = "/".join([s for _, s in stack] + [name])
        if kv:
            fields[path] = kv.group(2).strip()
        stack.append((indent, name))
    return gpus


def _int(v: str) -> int:
    return int(v) if v.isdigit() else 0


def ecc_findings(fields: dict[str, str]) -> tuple[list[str], list[str]]:
    """One GPU's -q fields -> (failures, warnings). Aggregate (lifetime) counts are history, not health."""
    fails, warns = [], []
    unc = sum(_int(v) for k, v in fields.items()
              if k.startswith("ecc errors/volatile/") and "uncorrectable" in k.rsplit("/", 1)[-1])
    unc += _int(fields.get("ecc errors/volatile/double bit/total", ""))
    if unc:
        fails.append(f"{unc} uncorrectable ECC error{'s' if unc > 1 else ''}")
    if any(k.endswith("sram threshold exceeded") and v.lower() == "yes" for k, v in fields.items()):
        fails.append("SRAM error threshold exceeded")
    if any(k.startswith("retired pages/pending") and v.lower() == "yes" for k, v in fields.items()):
        fails.append("retired pages pending (reset the GPU)")
    if fields.get("remapped rows/remapping failure occurred", "").lower() == "yes":
        fails.append("row remapping failure")
    if fields.get("remapped rows/pending", "").lower() == "yes":
        fails.append("row remap pending (reset the GPU)")
    if fields.get("ecc mode/current", "").lower() == "disabled":
        warns.append("ECC disabled")
    return fails, warns


def check_ecc(text: str) -> tuple[str, str]:
    """Whole `nvidia-smi -q -d ECC,PAGE_RETIREMENT,ROW_REMAPPER` output -> (status, message)."""
    gpus = parse_smi_q(text)
    if not gpus:
        if "EMULATED" in text:
            return SKIPPED, "emulated GPUs (corral virtual cluster): no ECC data"
        return SKIPPED, "nvidia-smi -q reported no GPU sections"
    fails, warns = [], []
    for bus, fields in sorted(gpus.items()):
        f, w = ecc_findings(fields)
        fails += [f"gpu {bus}: {x}" for x in f]
        warns += [f"gpu {bus}: {x}" for x in w]
    if fails:
        return FAIL, "; ".join(fails + warns)
    if warns:
        return WARN, "; ".join(warns)
    return OK, f"no uncorrectable ECC errors, retired pages or row remap problems on {len(gpus)} GPUs"


def parse_is_active(text: str, services: list[str]) -> dict[str, str]:
    """`systemctl is-active A B` prints one state a line, in order -> {A: "active", B: "inactive"}."""
    states = [line.strip() for line in text.splitlines() if line.strip()]
    return {s: (states[i] if i < len(states) else "unknown") for i, s in enumerate(services)}


def check_services(states: dict[str, str]) -> tuple[str, str]:
    bad = [f"service {s} {st}" for s, st in states.items() if st not in ("active", "reloading", "activating")]
    starting = [f"service {s} activating" for s, st in states.items() if st == "activating"]
    if bad:
        return FAIL, ", ".join(bad)
    if starting:
        return WARN, ", ".join(starting)
    return OK, f"active: {', '.join(states)}"


def check_mounts(paths: list[str], probes: dict[str, dict]) -> tuple[str, str]:
    """probes: path -> fs probe result ({exists, ismount, writable, write_error} or {error})."""
    bad = []
    for p in paths:
        r = probes.get(p, {"error": "not probed"})
        if r.get("error"):
            bad.append(f"mount {p}: {r['error']}")
        elif not r.get("exists"):
            bad.append(f"mount {p} missing")
        elif not r.get("ismount"):
            bad.append(f"{p} not mounted")
        elif not r.get("writable"):
            bad.append(f"mount {p} not writable ({r.get('write_error', 'unknown error')})")
    return (FAIL, "; ".join(bad)) if bad else (OK, f"mounted and writable: {', '.join(paths)}")


def check_free_space(mins: dict[str, int], probes: dict[str, dict]) -> tuple[str, str]:
    fails, warns, shown = [], [], []
    for p, need in mins.items():
        r = probes.get(p, {"error": "not probed"})
        if r.get("error"):
            fails.append(f"free space {p}: {r['error']}")
        elif not r.get("exists"):
            warns.append(f"free space {p}: path does not exist")
        elif r["free_mb"] < need:
            fails.append(f"free space {p} {r['free_mb']} MB < {need} MB")
        else:
            shown.append(f"{p} {r['free_mb']} MB")
    if fails:
        return FAIL, "; ".join(fails + warns)
    if warns:
        return WARN, "; ".join(warns)
    return OK, "free: " + ", ".join(shown)
