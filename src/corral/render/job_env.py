"""The fabric settings every job on a compute node gets (pure): NCCL's and UCX's environment, derived per
node from its facts (facts/hardware.py: RDMA ports, the NICs near its GPUs in `nvidia-smi topo -m`, the
interface carrying its cluster address), with the spec's `fabric.env` over them. Installed as
/etc/corral/job-env (KEY=value lines) and exported into every task by corral's TaskProlog
(deploy/jobhooks.py), unless the job set the variable itself.

- NCCL_IB_HCA / UCX_NET_DEVICES: the ACTIVE RDMA ports at the node's highest rate (a slower port is a
  storage or management link), and of those the HCAs one PCIe switch or less from a GPU when the
  matrix names NICs (GPUDirect RDMA's ones); `=` makes NCCL match the names exactly (mlx5_1 is not
  mlx5_10).
- NCCL_IB_GID_INDEX=3 where a chosen port is RoCE (Ethernet link layer): the index where a RoCE v2 port
  usually holds its IPv4-mapped GID (recent NCCL picks one itself; fabric.env overrides or drops it).
- NCCL_SOCKET_IFNAME: the interface that holds the node's cluster address (NCCL's bootstrap).
- Nothing RDMA without an active port: NCCL then uses sockets on that interface by itself."""

from __future__ import annotations

import re

from corral import paths
from corral.facts.records import NodeHW
from corral.spec.cluster import Cluster, Node
from corral.spec.models_topology import env_refusal
from corral.spec.types import WORD_RE

PATH = paths.JOB_ENV
ROCE_GID_INDEX = "3"


def _natural(name: str) -> tuple:
    return tuple(int(p) if p.isdigit() else p for p in re.split(r"(\d+)", name))


def rdma_ports(hw: NodeHW) -> list[tuple[str, int, str]]:
    """(hca, port, link layer) of the ports NCCL should use, in natural order."""
    ports = []
    for entry in hw.rdma:
        hca, port, state, layer, gbps = (entry.split(":") + ["", "", "", "0"])[:5]
        if state == "ACTIVE" and port.isdigit():
            ports.append((hca, int(port), layer, float(gbps or 0)))
    if not ports:
        return []
    top = max(p[3] for p in ports)
    fast = [p for p in ports if p[3] == top]
    near = [p for p in fast if p[0] in set(hw.gpu_nics)]
    chosen = near or fast
    return sorted(((h, n, layer) for h, n, layer, _ in chosen), key=lambda p: (_natural(p[0]), p[1]))


def cluster_iface(hw: NodeHW, address: str) -> str | None:
    return next((pair.split(" ", 1)[0] for pair in hw.addrs if pair.split(" ", 1)[1:] == [address]), None)


def derived(node: Node, hw: NodeHW | None) -> dict[str, str]:
    if hw is None:
        return {}
    out: dict[str, str] = {}
    ports = rdma_ports(hw)
    if ports:
        names = ",".join(f"{h}:{n}" for h, n, _ in ports)
        out["NCCL_IB_HCA"] = "=" + names
        out["UCX_NET_DEVICES"] = names
        if any(layer == "Ethernet" for _, _, layer in ports):
            out["NCCL_IB_GID_INDEX"] = ROCE_GID_INDEX
    iface = cluster_iface(hw, node.address)
    if iface:
        out["NCCL_SOCKET_IFNAME"] = "=" + iface
    return out


def job_env(cluster: Cluster, node: Node, hw: NodeHW | None) -> dict[str, str]:
    """What the node's jobs get: derived, then the spec's fabric.env (an empty value drops the variable);
    nothing with fabric.job_env off."""
    if not cluster.spec.fabric.job_env:
        return {}
    env = {**derived(node, hw), **cluster.spec.fabric.env}
    # the derived values come from the node's facts (interface and HCA names): one config word each, or
    # left out, like a name the spec could not hold; the file is read line by line by every job
    return {k: v for k, v in sorted(env.items())
            if v != "" and env_refusal(k) is None and WORD_RE.fullmatch(v)}


def job_env_text(cluster: Cluster, node: Node, hw: NodeHW | None) -> str:
    env = job_env(cluster, node, hw)
    lines = [f"# Managed by corral: exported into every task on {node.name} by its TaskProlog unless the job sets "
             "it (docs/components/fabric.md)", *(f"{k}={v}" for k, v in env.items())]
    return "\n".join(lines) + "\n"


def task_prolog() -> str:
    """Slurm's TaskProlog (run as the job's user, in the task's environment, before each task): prints
    `export NAME=value` for each line of the job-env file whose variable the job has not set; Slurm puts
    them into the task's environment. An XDG_RUNTIME_DIR the node lacks is unset. Names are checked again here ([A-Z0-9_] only) before use."""
    return ("#!/bin/sh\n# Managed by corral: Slurm TaskProlog; exports " + PATH + " into each task unless the job "
            "set the variable\n# (docs/components/fabric.md)\n"
            "# the submitting shell's XDG_RUNTIME_DIR (a login node's /run/user/UID) is not on this node: podman\n"
            "# would fail on it (docs/components/images.md)\n"
            "[ -z \"${XDG_RUNTIME_DIR:-}\" ] || [ -d \"$XDG_RUNTIME_DIR\" ] || echo 'unset XDG_RUNTIME_DIR'\n"
            f"[ -r {PATH} ] || exit 0\n"
            "while IFS= read -r line; do\n"
            "  case \"$line\" in ''|'#'*) continue ;; esac\n"
            "  name=${line%%=*}\n"
            "  case \"$name\" in ''|*[!A-Z0-9_]*) continue ;; esac\n"
            "  eval \"[ -n \\\"\\${$name+x}\\\" ]\" && continue\n"
            "  echo \"export $line\"\n"
            f"done < {PATH}\nexit 0\n")
