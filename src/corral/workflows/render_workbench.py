"""`corral render` for the researchers' workbench components (workflows/render_slurm.py merges these): EasyBuild's
configuration on login and compute nodes, from the function its deploy calls (deploy/easybuild.py). Its venv
and install tree are directories on the software root, not files."""

from __future__ import annotations

from collections.abc import Callable

from corral.spec.cluster import Node
from corral.workflows.render_slurm import Ctx, Files


def _easybuild(c: Ctx, node: Node) -> Files:
    from corral.components import gates
    from corral.render.easybuild import CONFIG, config
    if not gates.software_user(c.cluster, node):  # the NFS node builds the venv: no configuration there
        return {}
    return {CONFIG: config(c.cluster)}


RENDERERS: dict[str, Callable[[Ctx, Node], Files]] = {"easybuild": _easybuild}
