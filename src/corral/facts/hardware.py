"""Node hardware from `lscpu` and /proc/meminfo: works before Slurm is installed (unlike `slurmd -C`)."""

from __future__ import annotations

from pyinfra.api import FactBase

from corral.render.hw import NodeHW


def parse_hardware(lines: list[str]) -> NodeHW | None:
    cpus, sockets, cores, mem_kb = 0, set(), set(), 0
    for line in lines:
        line = line.strip()
        if line.startswith("MemTotal:"):
            mem_kb = int(line.split()[1])
        elif line and not line.startswith("#") and line.count(",") == 2:
            socket, core, _cpu = line.split(",")
            cpus += 1
            sockets.add(socket or "0")
            cores.add((socket or "0", core or str(cpus)))
    if not cpus or not mem_kb:
        return None
    return NodeHW(cpus=cpus, sockets=len(sockets), cores_per_socket=max(1, len(cores) // len(sockets)),
                  threads_per_core=max(1, cpus // len(cores)), memory_mb=mem_kb // 1024)


class NodeHardware(FactBase):
    """CPUs, sockets, cores per socket, threads per core and memory of a node (-> NodeHW)."""

    def command(self):
        return "lscpu -p=SOCKET,CORE,CPU 2>/dev/null; grep MemTotal /proc/meminfo"

    def process(self, output) -> NodeHW | None:
        return parse_hardware(list(output))
