"""Node hardware from `lscpu` and /proc/meminfo: works before Slurm is installed (unlike `slurmd -C`);
with a driver, also each GPU's CPU affinity and NVLinks from `nvidia-smi topo -m` and the MIG
devices (facts/mig.py) for gres.conf."""

from __future__ import annotations

import re

from pyinfra.api import FactBase

from corral.errors import CorralError
from corral.facts.mig import COMMAND as MIG_COMMAND
from corral.facts.mig import MARK_CI, split_output
from corral.facts.gpu_topology import cpu_to_core, gres_cores, gres_links, parse_topology
from corral.facts.records import NodeHW
from corral import paths


TOPO_MARK = "@@topo"


def gpu_topology(lscpu: list[str], topo_text: str) -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
    """gres.conf Cores= and Links= per GPU (index order) from `nvidia-smi topo -m`, and the NICs one
    PCIe switch or less from some GPU (PIX, PXB: the ones GPUDirect RDMA uses); ((), (), ()) when there is
    no usable matrix (no driver, no GPUs) - then gres.conf simply has no Cores/Links."""
    if "GPU0" not in topo_text.split():
        return (), (), ()
    try:
        topo = parse_topology(topo_text)
    except CorralError:
        return (), (), ()
    near = tuple(sorted({nic for g in topo["gpus"].values() for nic, link in g["nics"].items() if link in ("PIX", "PXB")}))
    try:
        cores, links = gres_cores(topo, cpu_to_core(lscpu)), gres_links(topo)
    except CorralError:
        return (), (), near
    order = sorted(topo["gpus"])
    return tuple(cores.get(i, "") for i in order), tuple(links[i] for i in order), near


RDMA, ADDR = "@@rdma\t", "@@addr "
NET_CMD = ("for d in /sys/class/infiniband/*/ports/*; do [ -r \"$d/state\" ] && printf '@@rdma\\t%s\\t%s\\t%s\\t%s\\n' "
           "\"$d\" \"$(cat \"$d/state\")\" \"$(cat \"$d/link_layer\" 2>/dev/null)\" \"$(cat \"$d/rate\" 2>/dev/null)\"; done; "
           "ip -o addr show 2>/dev/null | awk '{print \"@@addr\", $2, $4}'")


def net_facts(lines: list[str]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(rdma ports "hca:port:STATE:link_layer:gbps", "iface address" pairs) from NET_CMD's lines."""
    from corral.facts.infiniband import parse_rate
    rdma, addrs = [], []
    for line in lines:
        if line.startswith(RDMA):
            path, state, layer, rate = (line[len(RDMA):].split("\t") + ["", "", ""])[:4]
            parts = path.rstrip("/").split("/")
            try:
                gbps = parse_rate(rate)["gbps"]
            except CorralError:
                gbps = 0.0
            if len(parts) >= 3 and parts[-1].isdigit():
                rdma.append(f"{parts[-3]}:{parts[-1]}:{state.split(': ', 1)[-1]}:{layer or 'InfiniBand'}:{gbps:g}")
        elif line.startswith(ADDR):
            words = line[len(ADDR):].split()
            if len(words) == 2:
                addrs.append(f"{words[0]} {words[1].split('/', 1)[0]}")
    return tuple(sorted(rdma)), tuple(addrs)


NO_HOOKS = "@@no-job-hooks"
LOADED = "@@nvidia-loaded "  # the nvidia kernel module running now (not the one installed on disk)
LOADED_CMD = (f"echo \"{LOADED}$(cat /sys/module/nvidia/version 2>/dev/null || sed -n "
              "'s/^NVRM version:.* \\([0-9][0-9]*\\.[0-9][0-9.]*\\) .*/\\1/p' /proc/driver/nvidia/version "
              "2>/dev/null)\"")
PROLOG, TASK_PROLOG = paths.PROLOG, paths.TASK_PROLOG


def parse_hardware(lines: list[str]) -> NodeHW | None:
    hooks = NO_HOOKS not in lines
    loaded = next((line[len(LOADED):].strip() for line in lines if line.startswith(LOADED)), "")
    rdma, addrs = net_facts(lines)
    lines = [line for line in lines if line != NO_HOOKS and not line.startswith((LOADED, RDMA, ADDR))]
    mig: tuple = ()
    if MARK_CI in lines:
        at = lines.index(MARK_CI)
        lines, mig = lines[:at], split_output(lines[at:])
    if TOPO_MARK in lines:
        at = lines.index(TOPO_MARK)
        lines, topo_text = lines[:at], "\n".join(lines[at + 1:])
    else:
        topo_text = ""
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
    gpu_cores, gpu_links, gpu_nics = gpu_topology(lines, topo_text)
    return NodeHW(cpus=cpus, sockets=len(sockets), cores_per_socket=max(1, len(cores) // len(sockets)),
                  threads_per_core=max(1, cpus // len(cores)), memory_mb=mem_kb // 1024,
                  gpu_cores=gpu_cores, gpu_links=gpu_links, mig=mig, job_hooks=hooks,
                  rdma=rdma, gpu_nics=gpu_nics, addrs=addrs,
                  driver_loaded=loaded if re.fullmatch(r"\d+(\.\d+)+", loaded) else "")


class NodeHardware(FactBase):
    """CPUs, sockets, cores per socket, threads per core and memory of a node (-> NodeHW)."""

    def command(self):
        return (f"lscpu -p=SOCKET,CORE,CPU 2>/dev/null; grep MemTotal /proc/meminfo; {{ test -x {PROLOG} && test -x {TASK_PROLOG}; }} || echo {NO_HOOKS}; {LOADED_CMD}; "
                f"{NET_CMD}; "
                f"echo {TOPO_MARK}; command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi topo -m 2>/dev/null; "
                f"command -v nvidia-smi >/dev/null 2>&1 && {{ {MIG_COMMAND}; }}; true")

    def process(self, output) -> NodeHW | None:
        return parse_hardware(list(output))
