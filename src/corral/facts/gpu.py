"""GPU facts: PCI devices (sysfs or `lspci -nn`, no driver needed), `nvidia-smi` inventory, and the
loaded vs installed nvidia kernel module. Topology (`nvidia-smi topo -m`) is in gpu_topology.py.

Each fact is a shell command that never fails plus a pure parser; parsers raise CorralError (never
anything else) on output they do not understand. Fixtures: tests/fixtures/gpu/ (README.md there).
"""

from __future__ import annotations

import re

from debian.debian_support import Version
from pyinfra.api import FactBase, QuoteString, StringCommand

from corral.errors import CorralError
from corral.facts import pci_ids
from corral.facts.slurm import upstream_version

# --- PCI devices --------------------------------------------------------------------------------

_SYSFS_LINE = re.compile(r"^(?P<slot>[0-9a-f]{4,}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]) 0x(?P<ven>[0-9a-f]{4}) "
                         r"0x(?P<dev>[0-9a-f]{4}) 0x(?P<cls>[0-9a-f]{6}) (?P<numa>-?\d+|-)$", re.I)
_LSPCI_LINE = re.compile(r"^(?P<slot>\S+) .*?\[(?P<cls>[0-9a-f]{4})\]: .*"
                         r"\[(?P<ven>[0-9a-f]{4}):(?P<dev>[0-9a-f]{4})\]", re.I)
_BDF = re.compile(r"^(?:([0-9a-f]{4,}):)?([0-9a-f]{2}:[0-9a-f]{2}\.[0-7])$", re.I)


def _device(slot: str, vendor: str, device: str, cls: int, numa: int | None) -> dict:
    return {"slot": slot.lower(), "vendor": int(vendor, 16), "device": int(device, 16), "class": cls,
            "numa_node": numa}


def parse_pci_sysfs(lines: list[str]) -> list[dict]:
    """`PciDevices` output: `<slot> <vendor> <device> <class> <numa_node>` per line (sysfs values;
    numa_node -1 or `-` when the kernel reports none) -> [{slot, vendor, device, class, numa_node}]
    with `class` the 16-bit base+sub class (0x0302) like `lspci -nn` prints it."""
    devices = []
    for line in filter(None, (ln.strip() for ln in lines)):
        m = _SYSFS_LINE.match(line)
        if not m:
            raise CorralError("unexpected PCI sysfs line", value=line[:120],
                              fix="check /sys/bus/pci/devices/*/{vendor,device,class} on the node")
        numa = None if m["numa"] in ("-", "-1") else int(m["numa"])
        devices.append(_device(m["slot"], m["ven"], m["dev"], int(m["cls"], 16) >> 8, numa))
    return devices


def parse_lspci_nn(text: str) -> list[dict]:
    """`lspci -nn` (also -D, -PP, and -v/-k whose indented detail lines are skipped) -> the same
    shape as parse_pci_sysfs; numa_node is None (lspci -nn does not print it)."""
    devices = []
    for line in text.splitlines():
        if not line.strip() or line[0].isspace():
            continue
        m = _LSPCI_LINE.match(line)
        path = m["slot"].split("/") if m else []
        bdf = _BDF.match(path[-1]) if path else None
        if not m or not bdf:
            raise CorralError("not `lspci -nn` output (expected `<slot> <class> [cccc]: ... [vvvv:dddd]`)",
                              value=line[:120], fix="run `lspci -nn` (numeric ids are required)")
        domain = bdf[1] or (_BDF.match(path[0]) or bdf)[1] or "0000"
        devices.append(_device(f"{domain}:{bdf[2]}", m["ven"], m["dev"], int(m["cls"], 16), None))
    return devices


def classify(devices: list[dict]) -> dict[str, list[dict]]:
    """Split PCI devices into NVIDIA GPUs, NVSwitches and ConnectX HCAs (anything else is ignored).
    An NVIDIA id missing from corral.facts.pci_ids is kept with model/name/generation 'unknown'."""
    out: dict[str, list[dict]] = {"gpus": [], "nvswitches": [], "hcas": []}
    for d in devices:
        v, dev, cls = d["vendor"], d["device"], d["class"]
        if v == pci_ids.NVIDIA_VENDOR and cls in (pci_ids.CLASS_VGA, pci_ids.CLASS_3D):
            kind, known = "gpus", pci_ids.NVIDIA_GPUS.get(dev)
        elif v == pci_ids.NVIDIA_VENDOR and cls == pci_ids.CLASS_BRIDGE_OTHER:
            kind, known = "nvswitches", pci_ids.NVIDIA_NVSWITCHES.get(dev)
        elif v == pci_ids.MELLANOX_VENDOR and cls in (pci_ids.CLASS_INFINIBAND, pci_ids.CLASS_ETHERNET):
            kind, known = "hcas", pci_ids.MELLANOX_HCAS.get(dev)
        else:
            continue
        model, name, gen = known or ("unknown", "unknown", "unknown")
        entry = {"slot": d["slot"], "pci_id": f"{v:04x}:{dev:04x}", "model": model, "name": name,
                 "generation": gen, "numa_node": d["numa_node"]}
        if kind == "hcas":
            entry["link"] = "infiniband" if cls == pci_ids.CLASS_INFINIBAND else "ethernet"
        out[kind].append(entry)
    return out


class PciDevices(FactBase):
    """Every PCI device from sysfs (works before any driver and without pciutils) -> list of
    {slot, vendor, device, class, numa_node}; feed it to classify(). `root` is for tests."""

    def command(self, root: str = "") -> StringCommand:
        return StringCommand(
            "for d in", StringCommand(QuoteString(root), "/sys/bus/pci/devices/*", _separator=""),
            """; do [ -r "$d/vendor" ] || continue; printf '%s %s %s %s %s\\n' "${d##*/}" "$(cat "$d/vendor")" \
"$(cat "$d/device")" "$(cat "$d/class")" "$(cat "$d/numa_node" 2>/dev/null || echo -)"; done; true""")

    def process(self, output: list[str]) -> list[dict]:
        return parse_pci_sysfs(output)

    @staticmethod
    def default() -> list[dict]:
        return []


# --- nvidia-smi ---------------------------------------------------------------------------------

QUERY_FIELDS = ("index", "uuid", "name", "pci.bus_id", "memory.total", "driver_version",
                "persistence_mode", "mig.mode.current", "compute_cap")  # all in `--help-query-gpu`
_NA = {"[N/A]", "N/A", "[Not Supported]", ""}
_CUDA = re.compile(r"CUDA Version:\s*(\d+(?:\.\d+)+)")
_DRIVER = re.compile(r"Driver Version:\s*(\d+(?:\.\d+)+)")
_NAME_TO_MODEL = {m.name: m.model for m in pci_ids.NVIDIA_GPUS.values()}


def parse_query_gpu(text: str) -> list[dict]:
    """`nvidia-smi --query-gpu=<QUERY_FIELDS> --format=csv,noheader,nounits`; compute_cap may be
    missing (drivers before it existed are queried without it) -> one dict per GPU."""
    gpus = []
    for line in filter(None, (ln.strip() for ln in text.splitlines())):
        f = [x.strip() for x in line.split(",")]
        if len(f) not in (8, 9) or not f[0].isdigit() or not f[4].isdigit():
            raise CorralError(f"unexpected `nvidia-smi --query-gpu` line (want {len(QUERY_FIELDS)} fields: "
                              f"{','.join(QUERY_FIELDS)})", value=line[:160],
                              fix="run the query by hand on the node and compare")
        domain, _, rest = f[3].partition(":")
        gpus.append({
            "index": int(f[0]), "uuid": f[1], "name": f[2], "model": _NAME_TO_MODEL.get(f[2], "unknown"),
            "pci_bus_id": f[3], "slot": f"{domain[-4:]}:{rest}".lower(), "memory_mib": int(f[4]),
            "driver_version": f[5], "persistence_mode": None if f[6] in _NA else f[6] == "Enabled",
            "mig_mode": None if f[7] in _NA else f[7],
            "compute_cap": None if len(f) < 9 or f[8] in _NA else f[8]})
    return gpus


def parse_cuda_version(text: str) -> str | None:
    """The CUDA version from the `nvidia-smi` banner (`... CUDA Version: 12.4 |`), else None."""
    m = _CUDA.search(text)
    return m[1] if m else None


def parse_nvidia_smi(lines: list[str]) -> dict | None:
    """NvidiaSmiGpus output: sections `@@query` (the CSV) and `@@banner` (first banner lines), or
    `@@failed` with nvidia-smi's message -> {driver_version, cuda_version, gpus} or None."""
    sections: dict[str, list[str]] = {}
    current = None
    for line in lines:
        if line.startswith("@@"):
            current = sections.setdefault(line[2:].strip(), [])
        elif current is not None:
            current.append(line)
    if "query" not in sections:
        return None
    gpus = parse_query_gpu("\n".join(sections["query"]))
    banner = "\n".join(sections.get("banner", []))
    m = _DRIVER.search(banner)
    driver = m[1] if m else (gpus[0]["driver_version"] if gpus else None)
    return {"driver_version": driver, "cuda_version": parse_cuda_version(banner), "gpus": gpus}


def _query(fields: tuple[str, ...]) -> str:
    return f"nvidia-smi --query-gpu={','.join(fields)} --format=csv,noheader,nounits 2>/dev/null"


class NvidiaSmiGpus(FactBase):
    """GPUs as the driver sees them -> {driver_version, cuda_version, gpus: [...]}, or None where
    nvidia-smi is absent or fails (no driver, driver/library mismatch, no devices)."""

    def command(self) -> str:
        return ("command -v nvidia-smi >/dev/null 2>&1 || exit 0; "
                f"if q=$({_query(QUERY_FIELDS)}) || q=$({_query(QUERY_FIELDS[:-1])}); then "
                "echo @@query; printf '%s\\n' \"$q\"; echo @@banner; nvidia-smi 2>/dev/null | head -n 4; "
                "else echo @@failed; nvidia-smi 2>&1 | head -n 5; fi; true")

    def process(self, output: list[str]) -> dict | None:
        return parse_nvidia_smi(output)


# --- kernel module: loaded vs installed ---------------------------------------------------------

def parse_kernel_module(lines: list[str]) -> dict:
    """KernelModule output (`loaded <v>`, `modinfo <v>`, `dpkg <status> <package> <version>`) ->
    {loaded, on_disk, packages, installed}. `installed` is the module on disk for the running kernel
    (modinfo) or else the newest installed package whose branch suffix matches its version (Ubuntu
    keeps transitional packages like libnvidia-compute-495 at 510.x; those are ignored)."""
    facts: dict = {"loaded": None, "on_disk": None, "packages": {}}
    for line in lines:
        word, _, rest = line.strip().partition(" ")
        if word in ("loaded", "modinfo") and rest.strip():
            if not re.fullmatch(r"\d+(\.\d+)+", rest.strip()):
                raise CorralError(f"unexpected nvidia module version from {word}", value=rest.strip()[:80],
                                  fix="check /sys/module/nvidia/version and `modinfo -F version nvidia`")
            facts["loaded" if word == "loaded" else "on_disk"] = rest.strip()
        elif word == "dpkg":
            parts = rest.split()
            if len(parts) == 3 and parts[0][1:2] == "i":  # ii / hi: installed (held or not)
                facts["packages"][parts[1]] = parts[2]
    candidates = []
    for pkg, deb_version in facts["packages"].items():
        version = upstream_version(deb_version)
        branch = re.search(r"-(\d+)(?:-server)?$", pkg)
        if not branch or version.split(".")[0] == branch[1]:
            candidates.append(version)
    facts["installed"] = facts["on_disk"] or max(candidates, key=Version, default=None)
    return facts


def reboot_required(loaded: str | None, installed: str | None) -> tuple[bool, str]:
    """Whether the node must reboot (or reload the module) to run the installed driver, and why."""
    if installed is None:
        return False, (f"nvidia module {loaded} is loaded; the installed version is unknown" if loaded
                       else "no NVIDIA driver installed")
    if loaded is None:
        return True, f"NVIDIA driver {installed} is installed but the nvidia module is not loaded"
    if Version(loaded) != Version(upstream_version(installed)):
        return True, f"loaded nvidia module {loaded} differs from installed driver {installed}"
    return False, f"loaded nvidia module {loaded} matches the installed driver"


class KernelModule(FactBase):
    """Loaded nvidia module version vs what is installed -> parse_kernel_module()'s dict."""

    def command(self) -> str:
        return ("printf 'loaded %s\\n' \"$(cat /sys/module/nvidia/version 2>/dev/null)\"; "
                "printf 'modinfo %s\\n' \"$(modinfo -F version nvidia 2>/dev/null)\"; "
                "dpkg-query -W -f 'dpkg ${db:Status-Abbrev}${Package} ${Version}\\n' "
                "'nvidia-kernel-*' 'libnvidia-compute-*' 2>/dev/null; true")

    def process(self, output: list[str]) -> dict:
        return parse_kernel_module(output)
