"""`corral spec check|show|schema|reference` and `corral import deepops`."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import typer
from corral.cli.common import JsonOpt, SpecOpt, err, load_cluster, out, print_json, spec_path
from corral.errors import UsageError

spec_app = typer.Typer(no_args_is_help=True, help="Validate, show and document the cluster spec (offline).")
import_app = typer.Typer(no_args_is_help=True, help="Convert another tool's inventory to a cluster.yaml.")


@spec_app.command("check")
def check(spec: Optional[Path] = SpecOpt, as_json: bool = JsonOpt) -> None:
    """Validate cluster.yaml without contacting any node."""
    cluster = load_cluster(spec)
    from corral.spec.rules import spec_warnings
    warnings = spec_warnings(cluster)
    if as_json:
        print_json({"ok": True, "spec": str(spec_path(spec)), "nodes": len(cluster.nodes),
                    "spec_hash": cluster.spec_hash(), "warnings": warnings})
        return
    for w in warnings:
        err.print(f"warning: {w}", style="yellow", markup=False, highlight=False)
    gpus = sum(n.gpu_count for n in cluster.nodes)
    out.print(f"{spec_path(spec)}: ok - cluster {cluster.name!r} ({cluster.spec.scheduler}), "
              f"{len(cluster.nodes)} nodes, {gpus} GPUs", markup=False)


@spec_app.command("show")
def show(spec: Optional[Path] = SpecOpt, as_json: bool = JsonOpt) -> None:
    """Print the whole spec, defaults filled in, with every node group expanded to its nodes."""
    from corral.cli.spec_show import node_table, sections_text
    data = load_cluster(spec).expanded()
    if as_json:
        print_json(data)
        return
    out.print(node_table(data))
    out.print(sections_text(data), markup=False, emoji=False)


@spec_app.command("schema")
def schema() -> None:
    """Print the JSON Schema of cluster.yaml (for editors: yaml-language-server, IDEs)."""
    from corral.spec.models import ClusterSpec
    print_json(ClusterSpec.model_json_schema())


@spec_app.command("reference")
def reference() -> None:
    """Print the spec reference as Markdown (docs/spec.md is this output)."""
    from corral.spec.reference import markdown
    sys.stdout.write(markdown())


@import_app.command("deepops")
def deepops(config_dir: Path = typer.Argument(..., help="DeepOps config/ directory (with 'inventory')"),
            output: Path = typer.Option(Path("cluster.yaml"), "--output", "-o", help="file to write"),
            force: bool = typer.Option(False, "--force", help="overwrite an existing output file"),
            scheduler: Optional[str] = typer.Option(None, help="slurm | kubernetes, when the inventory has both"),
            as_json: bool = JsonOpt) -> None:
    """Convert a DeepOps config/ directory (inventory + group_vars) into a cluster.yaml, and report each
    DeepOps setting as mapped, changed on purpose or not carried, with its file:line."""
    from corral.importers.deepops import import_deepops
    from corral.importers.deepops_report import GROUPS
    if output.exists() and not force:
        raise UsageError(f"{output} exists; not overwriting it", value=str(output),
                         fix="pass --force or choose another --output")
    result = import_deepops(config_dir, scheduler=scheduler)
    output.write_text(result.yaml_text)
    if as_json:
        print_json({"ok": True, "output": str(output), **result.report.to_json()})
        return
    out.print(f"wrote {output}: " + ", ".join(f"{len(result.report.lines(g))} {g}" for g in GROUPS), markup=False)
    for group in GROUPS:
        items = sorted((i for i in result.report.items if i.group == group), key=_place)
        if items:
            out.print(f"\n{group} ({len(items)}):", markup=False)
        for item in items:
            out.print(f"  {item.line()}", markup=False, emoji=False)


def _place(item) -> tuple:
    """By file, then line (a report item's `where` is 'file:line', files, or empty: those last)."""
    file, _, line = item.where.rpartition(":")
    return (not item.where, file or item.where, int(line) if line.isdigit() else 0)
