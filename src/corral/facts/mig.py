"""MIG devices of a node (pure parsers + the shell fragment that reads them).

`nvidia-smi mig -lci` (compute instances: GPU, GI id, profile name, CI id; with or without the
Placement column of newer drivers) and /proc/driver/nvidia-caps/mig-minors (the minor number of each
GI's and CI's access device /dev/nvidia-caps/nvidia-cap<N>, which Slurm's gres.conf lists with the
parent /dev/nvidia<GPU> as the MIG device's MultipleFiles=).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

MINORS = "/proc/driver/nvidia-caps/mig-minors"
MARK_CI, MARK_MINORS = "@@mig-lci", "@@mig-minors"
# the minors table (over a thousand lines on an 8-GPU node) is read only when MIG devices exist
COMMAND = (f"lci=$(nvidia-smi mig -lci 2>/dev/null); echo {MARK_CI}; echo \"$lci\"; echo {MARK_MINORS}; "
           f"case \"$lci\" in *'MIG '*) cat {MINORS} 2>/dev/null;; esac")

_CI = re.compile(r"^\|\s+(\d+)\s+(\d+)\s+MIG\s+(\S+)\s+(\d+)\s+(\d+)(\s+\d+:\d+)?\s+\|$")


@dataclass(frozen=True)
class MigDevice:
    gpu: int
    profile: str     # the compute instance's profile: 3g.40gb (the whole GI), 1c.3g.20gb (a part)
    gi: int
    ci: int
    cap_gi: int      # /dev/nvidia-caps/nvidia-cap<cap_gi>
    cap_ci: int

    def files(self) -> str:
        return (f"/dev/nvidia{self.gpu},/dev/nvidia-caps/nvidia-cap{self.cap_gi},"
                f"/dev/nvidia-caps/nvidia-cap{self.cap_ci}")


def parse_compute_instances(text: str) -> list[tuple[int, int, str, int]]:
    """[(gpu, gi, profile, ci)]."""
    out = []
    for line in text.splitlines():
        m = _CI.match(line.strip())
        if m:
            out.append((int(m.group(1)), int(m.group(2)), m.group(3), int(m.group(5))))
    return out


def parse_minors(text: str) -> dict[str, int]:
    """'gpu0/gi1/access 12' -> {'gpu0/gi1/access': 12}."""
    out = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[1].isdigit():
            out[parts[0]] = int(parts[1])
    return out


def mig_devices(lci: str, minors: str) -> tuple[MigDevice, ...]:
    """Every compute instance with its access devices (one without a known minor is left out:
    Slurm could not constrain it), in GPU, GI, CI order."""
    table = parse_minors(minors)
    out = []
    for gpu, gi, profile, ci in sorted(parse_compute_instances(lci)):
        a, b = table.get(f"gpu{gpu}/gi{gi}/access"), table.get(f"gpu{gpu}/gi{gi}/ci{ci}/access")
        if a is not None and b is not None:
            out.append(MigDevice(gpu, profile, gi, ci, a, b))
    return tuple(out)


def minors_table(gpus: int) -> str:
    """/proc/driver/nvidia-caps/mig-minors as the driver lays it out: config, monitor, then per GPU
    15 GPU instances of 8 compute instances each (used by the virtual cluster's GPU emulation)."""
    lines, n = ["config 1", "monitor 2"], 3
    for g in range(gpus):
        for gi in range(15):
            lines.append(f"gpu{g}/gi{gi}/access {n}")
            n += 1
            for ci in range(8):
                lines.append(f"gpu{g}/gi{gi}/ci{ci}/access {n}")
                n += 1
    return "\n".join(lines) + "\n"


def split_output(lines: list[str]) -> tuple[MigDevice, ...]:
    """The COMMAND's output (after its first mark) -> MIG devices."""
    parts: dict[str, list[str]] = {MARK_CI: [], MARK_MINORS: []}
    current = None
    for line in lines:
        if line.strip() in parts:
            current = line.strip()
        elif current:
            parts[current].append(line)
    return mig_devices("\n".join(parts[MARK_CI]), "\n".join(parts[MARK_MINORS]))


def by_gpu(devices) -> dict[int, list[str]]:
    """GPU index -> sorted profiles of its MIG devices (GPUs without any are absent)."""
    from corral.spec.mig import profile_key
    out: dict[int, list[str]] = {}
    for d in devices:
        out.setdefault(d.gpu, []).append(d.profile)
    return {g: sorted(p, key=profile_key) for g, p in sorted(out.items())}
