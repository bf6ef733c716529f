"""`corral virtual up|down|status|ssh`: the local virtual cluster."""

from __future__ import annotations

import os
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Optional

import typer

from corral.cli.common import JsonOpt, OsOpt, err, out, print_json
from corral.virtual.defaults import DEFAULT_SUBNET

if TYPE_CHECKING:
    from rich.table import Table

DEFAULT_DIR = Path(os.environ.get("CORRAL_VIRTUAL_DIR", "/var/lib/corral/virtual"))
app = typer.Typer(no_args_is_help=True,
                  help="A local virtual cluster of real systemd Debian nodes (GPUs emulated).")
DirOpt = typer.Option(DEFAULT_DIR, "--dir", help="virtual cluster directory (cluster.yaml + .corral/)")


def _table(rows) -> Table:
    from rich.table import Table
    table = Table()
    for col in ("node", "address", "roles", "gpus (emulated)", "state", "ssh"):
        table.add_column(col)
    for r in rows:
        table.add_row(r.name, r.address, ",".join(r.roles), str(r.gpus),
                      f"running (pid {r.pid})" if r.running else "stopped", "ok" if r.ssh else "-")
    return table


@app.command("up")
def up(directory: Path = DirOpt,
       compute: int = typer.Option(2, min=1, max=64, help="compute nodes (new cluster only)"),
       gpus: int = typer.Option(4, min=0, max=16, help="emulated GPUs per compute node (new cluster only)"),
       gpu_model: str = typer.Option("h100", help="emulated GPU model (new cluster only)"),
       subnet: str = typer.Option(str(DEFAULT_SUBNET), help="private subnet for the bridge (new cluster only)"),
       os_name: Optional[str] = OsOpt, as_json: bool = JsonOpt) -> None:
    """Start the virtual cluster (idempotent: starts what is missing)."""
    from corral.workflows.up import start_virtual
    vc, rows = start_virtual(directory, compute=compute, gpus=gpus, gpu_model=gpu_model, subnet=subnet,
                             say=lambda line: err.print(line, markup=False), os_name=os_name)
    if as_json:
        print_json({"ok": True, "spec": str(vc.cluster.path), "nodes": [asdict(r) for r in rows]})
        return
    out.print(_table(rows))
    out.print(f"spec: {vc.cluster.path}\nnext: export CORRAL_SPEC={vc.cluster.path}; corral plan",
              markup=False)


def _vc(directory: Path):
    from corral.virtual.cluster import VirtualCluster
    from corral.spec.loader import load
    return VirtualCluster(load(directory / "cluster.yaml"))


@app.command("down")
def down(directory: Path = DirOpt,
         keep_disks: bool = typer.Option(False, "--keep-disks", help="keep node disks for the next up")) -> None:
    """Stop every node and remove the mounts, cgroups, bridge, server and sysctl changes up made."""
    _vc(directory).down(keep_disks=keep_disks)
    out.print("virtual cluster down", markup=False)


@app.command("status")
def status(directory: Path = DirOpt, as_json: bool = JsonOpt) -> None:
    """Show each virtual node: running, address, SSH."""
    rows = _vc(directory).status()
    if as_json:
        print_json({"ok": all(r.running and r.ssh for r in rows), "nodes": [asdict(r) for r in rows]})
        return
    out.print(_table(rows))
    if not all(r.running and r.ssh for r in rows):
        raise typer.Exit(1)


@app.command("ssh", context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def ssh(ctx: typer.Context, node: str = typer.Argument(..., help="node name"),
        user: str = typer.Option("root", "--user", "-u", help="log in as this user of the spec (their key: "
                                 ".corral/ssh/users/USER_ed25519)"),
        directory: Path = DirOpt) -> None:
    """Open a shell on a virtual node, or run a command there: `corral virtual ssh NODE -- CMD ARGS...`
    (the arguments reach the node as they are, each one word)."""
    import shlex
    vc = _vc(directory)
    n = vc.node(node)
    remote = [shlex.join(ctx.args)] if ctx.args else []
    cmd = vc.ssh_cmd(n.node.address, *remote, tty=not ctx.args and os.isatty(0), user=user)
    os.execvp(cmd[0], cmd)
