"""`corral facts`: hardware, GPU, NVSwitch, HCA, InfiniBand and driver facts of every node, read in
parallel through the engine (pinned host keys), one set of commands per node."""

from __future__ import annotations

import gevent
from corral.engine.pyinfra_seam import as_host

from corral.engine import run
from corral.facts.gpu import KernelModule, NvidiaSmiGpus, PciDevices, classify
from corral.facts.hardware import NodeHardware
from corral.facts.infiniband import InfinibandPorts
from corral.spec.cluster import Cluster

FACTS = {"hardware": NodeHardware, "pci": PciDevices, "nvidia_smi": NvidiaSmiGpus,
         "kernel_module": KernelModule, "infiniband": InfinibandPorts}


def summarize(raw: dict) -> dict:
    pci = classify(raw.get("pci") or [])
    smi = raw.get("nvidia_smi")
    hw = raw.get("hardware")
    return {
        "cpus": hw.cpus if hw else None, "memory_mb": hw.memory_mb if hw else None,
        "pci_gpus": pci["gpus"], "nvswitches": pci["nvswitches"], "hcas": pci["hcas"],
        "driver": {"version": smi["driver_version"], "cuda": smi["cuda_version"]} if smi else None,
        "gpus": smi["gpus"] if smi else [],
        "kernel_module": raw.get("kernel_module"), "infiniband": raw.get("infiniband") or [],
        "mig_devices": [{"gpu": d.gpu, "profile": d.profile, "gi": d.gi, "ci": d.ci, "files": d.files()}
                        for d in (hw.mig if hw else ())],
    }


def gather_facts(cluster: Cluster, limit: list[str] | None = None) -> tuple[dict[str, dict], dict[str, str]]:
    """({node: summary}, {node: error}) for the selected nodes."""
    found: dict[str, dict] = {}

    def hook(state, hosts) -> None:
        def one(h) -> None:
            raw = {}
            with as_host(state, h):
                for key, fact in FACTS.items():
                    try:
                        raw[key] = h.get_fact(fact)
                    except Exception as exc:  # noqa: BLE001 - one unreadable fact must not hide the rest
                        raw[key] = None
                        raw.setdefault("errors", []).append(f"{key}: {exc}")
            found[h.name] = {**summarize(raw), "errors": raw.get("errors", [])}
        gevent.joinall([gevent.spawn(one, h) for h in hosts])

    result = run(cluster, [], mode="plan", command="facts", record=False, limit=limit, prepare=hook)
    errors = {n: r.error or "unreachable" for n, r in result.nodes.items() if not r.reachable or r.error}
    return found, errors
