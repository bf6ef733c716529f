"""software.easybuild: EasyBuild on the shared software root (docs/components/software.md, "EasyBuild").

On the node that writes the software root (spec/shared.maker): EasyBuild's venv, built once from its pinned,
hash-checked sdists (deploy/venvs.py), and its install tree (<prefix>: software/, modules/all, sources/,
easyconfigs/, ebfiles_repo/, builds/), owned by the software manager: only that account writes it, root
never builds there. On every login and compute node: /etc/xdg/easybuild.d/corral.cfg (render/easybuild.py). On
the build node: the manager's build directory on local disk (0700). Builds themselves are Slurm jobs of the
manager (`corral software build`, workflows/software_build.py). Runs after `software` (components/slurm.py).
"""

from __future__ import annotations

import posixpath

from pyinfra import host
from pyinfra.api import deploy

from corral import workbench_wheels as ww
from corral.components import gates
from corral.deploy import operations
from corral.deploy.nodestate import Want, register, register_for_run
from corral.deploy.venvs import BUILD_PACKAGES, MARK, build_script, venv_built
from corral.render.easybuild import BUILD_PATH, CONFIG, config
from corral.spec import easybuild as eb

WANT = register(Want(paths=(CONFIG, "/etc/xdg/easybuild.d", eb.BUILD_DIR, BUILD_PATH), packages=BUILD_PACKAGES))


@deploy("easybuild")
def easybuild() -> None:
    node, cluster = host.data.corral_node, host.data.corral_cluster
    if not gates.easybuild(cluster, node):
        return
    python = eb.python_of(cluster)
    lock = ww.lock_id(python, ww.EASYBUILD)
    user, group = eb.owner(cluster)
    builder, directory = eb.venv_builder(cluster, lock)
    if builder.name == node.name:
        want = register_for_run(Want(paths=(f"{directory}/{MARK}",), packages=BUILD_PACKAGES))
        operations.packages(name="python3-venv (EasyBuild's venv's builder)", names=list(BUILD_PACKAGES),
                            want=want, together=True)
        venv_built(name=f"EasyBuild venv on {eb.venv(cluster, lock)}", venv=ww.EASYBUILD.name, directory=directory,
                   python=python, lock=lock, script=build_script(ww.EASYBUILD, lock, directory, python), want=want)
    maker, tree = eb.tree_maker(cluster)
    if maker.name == node.name:
        dirs = [tree] + [posixpath.join(tree, d) for d in eb.TREE_DIRS]
        want = register_for_run(Want(paths=tuple(dirs)))
        for d in dirs:  # the manager's alone: builds write here, users read
            operations.directory(name=f"EasyBuild's tree: {d}", path=d, user=user, group=group, want=want)
    if not gates.software_user(cluster, node):
        return
    operations.directory(name="/etc/xdg/easybuild.d", path="/etc/xdg/easybuild.d", want=WANT)
    operations.managed_file(name="EasyBuild's configuration", path=CONFIG, content=config(cluster), want=WANT)
    if eb.build_node(cluster).name == node.name:  # its builds' directories, on local disk, the manager's alone
        operations.directory(name=eb.BUILD_DIR, path=eb.BUILD_DIR, mode="700", user=user, group=group, want=WANT)
        operations.directory(name=BUILD_PATH, path=BUILD_PATH, mode="700", user=user, group=group, want=WANT)
