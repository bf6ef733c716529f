"""`corral fanout` (control host) and `corral node converge` (on a node, started by the fan-out)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from corral.cli.common import JsonOpt, LimitOpt, SpecOpt, limit_names, load_cluster, print_json
from corral.cli.run_cmd import show_plan, show_summary

node_app = typer.Typer(no_args_is_help=True, add_completion=False, rich_markup_mode=None,
                       help="What runs on a node itself (started by `corral fanout`).")


def fanout(spec: Optional[Path] = SpecOpt, limit: Optional[str] = LimitOpt,
           deploys: str = typer.Option("health,jobhooks", "--deploys", help="node-local deploys, comma-separated"),
           via: str = typer.Option("slurm", "--via", help="slurm: one allocation, sbcast, srun from the controller; "
                                   "ssh: the SSH engine from here (to compare, or where Slurm cannot be used)"),
           plan: bool = typer.Option(False, "--plan", help="say what would change, change nothing"),
           as_json: bool = JsonOpt) -> None:
    """Converge the node-local deploys (health checks, job hooks) on compute nodes through Slurm."""
    from corral.fanout.driver import fan_out
    cluster = load_cluster(spec)
    result = fan_out(cluster, [d.strip() for d in deploys.split(",") if d.strip()], mode="plan" if plan else "apply",
                     limit=limit_names(cluster, limit), via=via)
    if as_json:
        print_json(result.to_json())
    else:
        (show_plan if plan else show_summary)(result)
    if not result.ok:
        raise typer.Exit(1)


@node_app.command("converge")
def node_converge(snapshot: Path = typer.Option(..., "--snapshot", help="the snapshot `corral fanout` sent"),
                  node: str = typer.Option(..., "--node", help="this node's name in the spec ($SLURMD_NODENAME)")) -> None:
    """Run the snapshot's deploys against this machine; print the result as CORRAL-RESULT lines."""
    from corral.fanout.node import main
    raise typer.Exit(main(str(snapshot), node))


COMMANDS = {"fanout": fanout}
