"""GPU topology from `nvidia-smi topo -m` and what Slurm's gres.conf needs from it (Links=, Cores=).

The matrix is tab-separated (`nvidia-smi` prints `\\tGPU0\\tGPU1...` and ` X ` for self); copies from a
terminal have the tabs expanded to spaces, so both are read. Columns: GPUn, then NICs (old drivers
name them `mlx5_0`..., newer ones `NIC0`... with a `NIC Legend:` after the matrix), then `CPU Affinity`,
`NUMA Affinity` and (newer drivers) `GPU NUMA ID`. Links: X (self), NV# (# bonded NVLinks), PIX, PXB,
PHB, NODE, SYS (SOC on old drivers).
"""

from __future__ import annotations

import re

from corral.errors import CorralError

_LINK = re.compile(r"^(X|NV\d+|[A-Z]{3,4})$")
_GPU = re.compile(r"^GPU(\d+)$")
_NIC_LEGEND = re.compile(r"^\s*(NIC\d+):\s*(\S+)\s*$")
_TAIL_COLUMNS = ("CPU Affinity", "NUMA Affinity", "GPU NUMA ID")


def expand_cpulist(text: str) -> list[int]:
    """'0-47,96-143' -> [0, ..., 47, 96, ..., 143]; '' or 'N/A' -> []."""
    text = text.strip()
    if text in ("", "N/A"):
        return []
    cpus: list[int] = []
    for part in text.split(","):
        m = re.fullmatch(r"(\d+)(?:-(\d+))?", part.strip())
        if not m or (m[2] is not None and int(m[2]) < int(m[1])):
            raise CorralError("bad CPU list in `nvidia-smi topo -m`", value=text,
                              fix="expected ranges like 0-47,96-143")
        cpus.extend(range(int(m[1]), int(m[2] or m[1]) + 1))
    return cpus


def compress_cpulist(cpus: list[int] | set[int]) -> str:
    """[0, 1, 2, 5] -> '0-2,5' (the list syntax of gres.conf Cores= and of the kernel)."""
    out, ordered = [], sorted(set(cpus))
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        out.append(str(ordered[i]) if i == j else f"{ordered[i]}-{ordered[j]}")
        i = j + 1
    return ",".join(out)


def _split(line: str, tabbed: bool) -> list[str]:
    return [f.strip() for f in line.strip().split("\t")] if tabbed else line.split()


def _header(line: str, tabbed: bool) -> list[str]:
    """Device column names (GPU0.., NIC0.. or mlx5_0..), without the trailing affinity columns."""
    if tabbed:
        names = [f for f in _split(line, True) if f]
    else:
        text = line
        for col in _TAIL_COLUMNS:
            text = text.replace(col, col.replace(" ", "_"))
        names = [n.replace("_", " ") if n.replace("_", " ") in _TAIL_COLUMNS else n for n in text.split()]
    return [n for n in names if n not in _TAIL_COLUMNS]


def parse_topology(text: str) -> dict:
    """`nvidia-smi topo -m` -> {"gpus": {index: {"links": {other_gpu: link}, "nics": {nic: link},
    "cpu_affinity": [cpus], "numa_affinity": [nodes]}}, "nics": [names]}. NIC columns named NICn are
    renamed after the `NIC Legend:` (NIC0 -> mlx5_0). Text before the header and the legend after the
    matrix are ignored."""
    lines = text.splitlines()
    start = next((i for i, ln in enumerate(lines) if "GPU0" in ln.split()), None)
    if start is None:
        raise CorralError("no `nvidia-smi topo -m` matrix (no GPU0 column header)", value=text.strip()[:120],
                          fix="run `nvidia-smi topo -m` on the node; it needs the NVIDIA driver loaded")
    tabbed = "\t" in lines[start]
    columns = _header(lines[start], tabbed)
    gpu_cols = [c for c in columns if _GPU.match(c)]
    legend = dict(m.groups() for m in map(_NIC_LEGEND.match, lines[start:]) if m)
    nic_names = [legend.get(c, c) for c in columns if not _GPU.match(c)]
    gpus: dict[int, dict] = {}
    for line in lines[start + 1:]:
        if not line.strip() or line.strip().startswith("Legend"):
            break
        fields = _split(line, tabbed)
        label, cells, rest = fields[0], fields[1:1 + len(columns)], fields[1 + len(columns):]
        m = _GPU.match(label)
        if not m:
            continue  # NIC rows: the GPU rows already hold every GPU-NIC link
        if len(cells) != len(columns) or not all(_LINK.match(c) for c in cells):
            raise CorralError(f"malformed `nvidia-smi topo -m` row for {label} (want {len(columns)} links)",
                              value=line.strip()[:160], fix="compare with `nvidia-smi topo -m` on the node")
        links = dict(zip(columns, cells))
        gpus[int(m[1])] = {
            "links": {int(c[3:]): links[c] for c in gpu_cols if c != label},
            "nics": {legend.get(c, c): links[c] for c in columns if not _GPU.match(c)},
            "cpu_affinity": expand_cpulist(rest[0]) if rest else [],
            "numa_affinity": expand_cpulist(rest[1]) if len(rest) > 1 else []}
    if sorted(gpus) != sorted(int(c[3:]) for c in gpu_cols):
        raise CorralError("`nvidia-smi topo -m` has GPU columns without rows", value=sorted(gpus),
                          fix="the output looks truncated; capture it again")
    return {"gpus": gpus, "nics": nic_names}


def nvlink_count(link: str) -> int:
    return int(link[2:]) if link.startswith("NV") else 0


def nvlink_pairs(topo: dict) -> list[tuple[int, int, int]]:
    """(gpu_a, gpu_b, bonded NVLinks) for each NVLink-connected pair, a < b."""
    return sorted((a, b, nvlink_count(link)) for a, g in topo["gpus"].items()
                  for b, link in g["links"].items() if a < b and nvlink_count(link))


def gres_links(topo: dict) -> dict[int, str]:
    """gres.conf Links= per GPU: ordered by GPU index, -1 for the GPU itself, the number of NVLinks
    to each other GPU, 0 where there is none (gres.conf(5), Links). Slurm numbers GPUs by PCI bus id,
    as nvidia-smi does."""
    order = sorted(topo["gpus"])
    return {i: ",".join("-1" if j == i else str(nvlink_count(topo["gpus"][i]["links"].get(j, "")))
                        for j in order) for i in order}


def cpu_to_core(lscpu_lines: list[str]) -> dict[int, int]:
    """`lscpu -p=SOCKET,CORE,CPU` (what facts.hardware.NodeHardware runs) -> {cpu: Slurm core index}.
    Slurm numbers cores socket by socket ("core 0 is the first core on the first socket, core 1 the
    second core on the first socket", gres.conf(5) Cores), whatever the kernel's CPU numbering."""
    cores: dict[int, tuple[int, int]] = {}
    for line in lscpu_lines:
        parts = line.strip().split(",")
        if len(parts) == 3 and all(p.isdigit() for p in parts):
            cores[int(parts[2])] = (int(parts[0]), int(parts[1]))
    index = {core: i for i, core in enumerate(sorted(set(cores.values())))}
    return {cpu: index[core] for cpu, core in cores.items()}


def gres_cores(topo: dict, cpu_core: dict[int, int] | None = None) -> dict[int, str]:
    """gres.conf Cores= per GPU from its CPU affinity. Slurm wants its logical core indices, not CPU
    (thread) ids: pass cpu_to_core() of the node; without it the CPU ids are used as they are, which is
    right only with one thread per core numbered socket by socket. GPUs with no affinity (N/A) are
    left out. Slurm co-allocates by socket (or NUMA node with SlurmdParameters=numa_node_as_socket),
    which is the granularity nvidia-smi reports affinity at."""
    out = {}
    for i, g in sorted(topo["gpus"].items()):
        cpus = g["cpu_affinity"]
        if cpu_core is not None:
            missing = [c for c in cpus if c not in cpu_core]
            if missing:
                raise CorralError(f"GPU{i} CPU affinity names CPUs lscpu does not list", value=missing[:8],
                                  fix="gather `lscpu -p=SOCKET,CORE,CPU` and `nvidia-smi topo -m` together")
            cpus = [cpu_core[c] for c in cpus]
        if cpus:
            out[i] = compress_cpulist(cpus)
    return out
