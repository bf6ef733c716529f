"""Fact records: what corral learns from a node and caches (the hardware facts cache holds these).
Renderers read them; they import nothing above facts/."""

from __future__ import annotations

from dataclasses import dataclass

from corral.facts.mig import MigDevice


@dataclass(frozen=True)
class NodeHW:
    """From `slurmd -C` on the node: what slurm.conf's NodeName line declares."""

    cpus: int
    sockets: int
    cores_per_socket: int
    threads_per_core: int
    memory_mb: int
    # per GPU, in index order, from `nvidia-smi topo -m` (empty without a driver): gres.conf Cores=, Links=
    gpu_cores: tuple[str, ...] = ()
    gpu_links: tuple[str, ...] = ()
    # MIG devices (compute instances) found with the driver: gres.conf/slurm.conf describe them
    mig: tuple[MigDevice, ...] = ()
    # corral's Prolog/Epilog installed (slurm.conf names them only when every compute node has them)
    job_hooks: bool = True
    # the nvidia kernel module running now ("" when none): differs from the installed one -> reboot needed
    driver_loaded: str = ""
    # RDMA ports "hca:port:STATE:link_layer:gbps" (/sys/class/infiniband), the NICs of `nvidia-smi topo -m`
    # at PIX/PXB from some GPU, and "iface address" pairs (`ip -o addr`): the job environment (render/job_env.py)
    rdma: tuple[str, ...] = ()
    gpu_nics: tuple[str, ...] = ()
    addrs: tuple[str, ...] = ()
