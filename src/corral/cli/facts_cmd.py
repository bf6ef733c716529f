"""`corral facts`: what each node has (CPUs, memory, GPUs by PCI and driver, NVSwitches, HCAs, IB)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from corral.cli.common import JsonOpt, SpecOpt, err, limit_names, load_cluster, out, print_json


def _mig(devices: list[dict]) -> str:
    """'1g.10gb x4, 3g.40gb x2' (MIG devices by profile) or '-'."""
    counts: dict[str, int] = {}
    for d in devices:
        counts[d["profile"]] = counts.get(d["profile"], 0) + 1
    return ", ".join(f"{p} x{n}" for p, n in sorted(counts.items())) or "-"


def facts(spec: Optional[Path] = SpecOpt, node: Optional[str] = typer.Option(
          None, "--node", "-n", help="only these nodes (hostlist)"), as_json: bool = JsonOpt) -> None:
    """Read hardware and GPU facts from the nodes (changes nothing)."""
    from corral.workflows.facts_report import gather_facts
    cluster = load_cluster(spec)
    found, errors = gather_facts(cluster, limit_names(cluster, node, "--node"))
    if as_json:
        print_json({"ok": not errors, "nodes": found, "errors": errors})
    else:
        from rich.table import Table
        table = Table()
        for col in ("node", "CPUs", "mem MB", "GPUs", "PCI GPUs", "driver", "MIG", "NVSw", "HCAs", "IB"):
            table.add_column(col)
        for name, f in sorted(found.items()):
            names = sorted({g["model"] or g["name"] for g in f["gpus"]})
            pci = sorted({g["model"] for g in f["pci_gpus"]})
            table.add_row(name, str(f["cpus"]), str(f["memory_mb"]),
                          f"{len(f['gpus'])} x {', '.join(names)}" if f["gpus"] else "0",
                          f"{len(f['pci_gpus'])} {','.join(pci)}".strip(),
                          f["driver"]["version"] if f["driver"] else "-", _mig(f["mig_devices"]),
                          str(len(f["nvswitches"])),
                          str(len(f["hcas"])), str(len(f["infiniband"])))
        out.print(table)
        for name, e in sorted(errors.items()):
            err.print(f"{name}: {e}", markup=False)
    if errors:
        raise typer.Exit(1)


COMMANDS = {"facts": facts}
