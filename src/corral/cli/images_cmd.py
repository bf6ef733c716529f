"""`corral images pull/list/rm`: squashfs images on shared storage (the work is in workflows/images_*.py).
Text or one JSON object (always, `ok: false` and the error on a failure, a usage or spec error too);
exit 1 when the step failed or an image has a problem, 2 on a usage or spec error, 130 on Ctrl-C (the
pull's job cancelled and its partial file removed first)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from corral.cli.common import JsonOpt, SpecOpt, load_cluster, out, verdict

images_app = typer.Typer(no_args_is_help=True, help="Pre-staged container images: squashfs files on shared "
                                                    "storage that jobs run with --container-image=PATH.")
ToOpt = typer.Option(None, "--to", metavar="DIR", help="the images directory on shared storage every login and "
                                                       "compute node mounts (default: <software.root>/images)")


@images_app.command("pull")
def pull(ref: str = typer.Argument(..., metavar="REF", help="registry[:port]/path[:tag][@sha256:DIGEST]"),
         to: Optional[str] = ToOpt, spec: Optional[Path] = SpecOpt, as_json: bool = JsonOpt) -> None:
    """Convert REF once to DIR/NAME.sqsh by a Slurm job on a compute node (podman pulls it through the
    cluster's registry and caches, mksquashfs makes the file), with its manifest NAME.json (ref, digest,
    size, sha256, time). Users run `srun --container-image=DIR/NAME.sqsh ...`."""
    from corral.workflows.images_run import pull as run_pull

    def show(r: dict) -> None:
        if r["ok"]:
            out.print(f"{r['path']}: {r['ref']} {r['digest']}, {r['size']} bytes, sha256 {r['sha256']} "
                      f"(job {r['job']} on {r['built_on']})", markup=False)

    def work() -> dict:
        from corral.spec.image_ref import parse
        parse(ref)  # a hostile reference is refused before the spec is even read
        return run_pull(load_cluster(spec), ref, to)
    verdict(as_json, work, show)


@images_app.command("list")
def list_(to: Optional[str] = ToOpt, spec: Optional[Path] = SpecOpt, as_json: bool = JsonOpt) -> None:
    """The images in DIR from their manifests, each .sqsh's sha256 computed again and compared (a mismatch,
    a missing file or a file without a manifest is shown)."""
    from corral.workflows.images_run import list_images

    def show(r: dict) -> None:
        from rich.table import Table
        table = Table(title=f"{r['dir']} (read on {r['node']})")
        for col in ("name", "ref", "digest", "size", "time", "check"):
            table.add_column(col)
        for i in r["images"]:
            table.add_row(i["name"], str(i["ref"] or "-"), str(i["digest"] or "-")[:19], str(i["size"]),
                          str(i["time"] or "-"), i["problem"] or "sha256 ok")
        out.print(table)
    verdict(as_json, lambda: list_images(load_cluster(spec), to), show)


@images_app.command("rm")
def rm(name: str = typer.Argument(..., metavar="NAME", help="as `corral images list` shows it (no .sqsh)"),
       to: Optional[str] = ToOpt, spec: Optional[Path] = SpecOpt, as_json: bool = JsonOpt) -> None:
    """Remove DIR/NAME.sqsh and its manifest; refused while a pending or running job names it."""
    from corral.workflows.images_run import rm as run_rm

    def show(r: dict) -> None:
        if r["ok"]:
            out.print(f"removed {r['path']}", markup=False)
    verdict(as_json, lambda: run_rm(load_cluster(spec), name, to), show)
