"""`corral render`: the files corral would install, per node, into a directory, without contacting any
node (the work is in workflows/render_files.py). With --json it prints one object, also when it fails."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from corral.cli.common import JsonOpt, SpecOpt, load_cluster, out, print_json
from corral.errors import CorralError


def render(spec: Optional[Path] = SpecOpt,
           output: Path = typer.Option(..., "--output", "-o", help="the directory to write into: <node>/<path>, "
                                       "cluster/ (Kubernetes objects and values), NOTES.txt"),
           node: Optional[str] = typer.Option(None, "--node", help="only this node's files"),
           as_json: bool = JsonOpt) -> None:
    """Write every file corral would install, per node, for review (no node is contacted; hardware facts
    from the state dir's cache; secrets never written)."""
    from corral.workflows.render_files import render as run_render
    try:
        done = run_render(load_cluster(spec), output, node)
    except CorralError as exc:
        if as_json:
            print_json({"ok": False, "error": str(exc)})
        raise
    if as_json:
        print_json(done)
        return
    for name, paths in done["files"].items():
        out.print(f"{name}: {len(paths)} file(s)", markup=False)
    for line in done["notes"]:
        out.print(f"note: {line}", markup=False)
    out.print(f"written under {done['dir']}", markup=False)


COMMANDS = {"render": render}
