"""`corral render` for the researchers' workbench components (workflows/render_slurm.py merges these): EasyBuild's
configuration on login and compute nodes, from the function its deploy calls (deploy/easybuild.py); the notebook
hub's files on its node, from render/jupyterhub.py hub_files() as apply installs them, its secrets as placeholders and
its certificate as apply made it. The venvs and the install tree are directories on the software root, not files."""

from __future__ import annotations

from collections.abc import Callable

from corral.spec.cluster import Node
from corral.workflows.render_slurm import Ctx, Files, secret


def _easybuild(c: Ctx, node: Node) -> Files:
    from corral.components import gates
    from corral.render.easybuild import CONFIG, config
    if not gates.software_user(c.cluster, node):  # the NFS node builds the venv: no configuration there
        return {}
    return {CONFIG: config(c.cluster)}


def _jupyterhub(c: Ctx, node: Node) -> Files:
    from corral import workbench_wheels
    from corral.render import jupyterhub as hub
    from corral.workflows.render_images import _made
    jh = c.cluster.spec.workbench.jupyterhub
    assert jh is not None  # the hub's component applies where the spec has one
    if jh.tls is not None:
        cert: str | bytes = secret(f"workbench.jupyterhub.tls.cert={jh.tls.cert}")
    else:
        leaf, ca = _made(c, "ca/jupyterhub.pem"), _made(c, "ca/ca.pem")  # the chain apply sends (site_ca)
        cert = leaf + ca if isinstance(leaf, bytes) and isinstance(ca, bytes) else leaf
    return {**hub.hub_files(c.cluster, workbench_wheels.lock_id(hub.python_of(c.cluster))), hub.CERT: cert,
            hub.KEY: secret("state-dir/secrets/ca/jupyterhub.key"),
            hub.COOKIE: secret("state-dir/secrets/jupyterhub-cookie") + "\n",
            hub.ENV: hub.env_file(secret("state-dir/secrets/jupyterhub-proxy-token"),
                                  secret("state-dir/secrets/jupyterhub-validate-token"))}


RENDERERS: dict[str, Callable[[Ctx, Node], Files]] = {"easybuild": _easybuild, "jupyterhub": _jupyterhub}
