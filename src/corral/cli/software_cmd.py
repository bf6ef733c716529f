"""`corral software build`: EasyBuild builds an easyconfig as a Slurm job of the software manager (the work is
in workflows/software_run.py). Text or one JSON object (always, `ok: false` and the error on a failure, a
usage or spec error too); exit 1 when the build failed, 2 on a usage or spec error, 130 on Ctrl-C (the
build's job cancelled first)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from corral.cli.common import JsonOpt, SpecOpt, load_cluster, out, verdict

software_app = typer.Typer(no_args_is_help=True, help="The researchers' shared software on the software root "
                                                      "(software.easybuild).")


@software_app.command("build")
def build(easyconfig: Path = typer.Argument(..., metavar="EASYCONFIG", help="a local easyconfig file NAME.eb"),
          spec: Optional[Path] = SpecOpt, as_json: bool = JsonOpt) -> None:
    """Build EASYCONFIG with EasyBuild (`eb --robot`: what it needs from the robot path too) as a Slurm job of
    the software manager on the build node; its module is then on every user's MODULEPATH. The easyconfig is
    kept in <prefix>/easyconfigs, where later builds' robot finds it."""
    from corral.workflows.software_build import easyconfig as check
    from corral.workflows.software_run import build as run_build

    def show(r: dict) -> None:
        if r["ok"]:
            out.print(f"built {r['module']} (job {r['job']} of {r['user']} on {r['build_node']}; log {r['log']})",
                      markup=False)
        elif r.get("log"):
            out.print(f"job output: {r['log']}" + (f"\nEasyBuild's log: {r['eb_log']}" if r.get("eb_log") else ""),
                      markup=False)

    def work() -> dict:
        check(easyconfig)  # a bad file is refused before the spec is even read
        return run_build(load_cluster(spec), str(easyconfig))
    verdict(as_json, work, show)
