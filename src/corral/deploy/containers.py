"""containers: enroot on compute nodes (NVIDIA's release .debs, checked against the spec's sha256,
/etc/enroot/enroot.conf from the spec) and pyxis on every Slurm node (srun parses its options, slurmd
and slurmstepd run it), built on the node against the installed Slurm's headers (libslurm-dev), with
corral's job environment plugin beside it (render/spank_env.py: a TaskProlog cannot run in a container).
Runs before the Slurm deploys, so the plugin exists before plugstack.conf names it (deploy/slurm.py);
the per-user enroot directories are made and cleaned by corral's prolog/epilog (node/jobhooks.py)."""

from __future__ import annotations

import hashlib

from pyinfra import host
from pyinfra.api import deploy, operation

from corral.bundle.downloads import bundled
from corral.engine.shell import sh

from corral.deploy import operations, users
from corral.deploy.nodestate import Want, register, register_for_run, snapshot
from corral.engine.notes import annotate
from corral.facts.slurm import upstream_version
from corral.render.containers import (BUILD_PACKAGES, ENROOT_CONF, FETCH_PACKAGES, PYXIS_MARK, PYXIS_SO, TASK_MOUNTS,
                                      enroot_conf, pyxis_build_script, pyxis_mark)
from corral.render.debs import release_debs_script
from corral.render import spank_env

SLURM_ROLES = ("controller", "compute", "login")
WANT = register(Want(paths=(ENROOT_CONF, TASK_MOUNTS, PYXIS_SO, PYXIS_MARK, spank_env.SO, spank_env.MARK, spank_env.SOURCE_PATH),
                     packages=FETCH_PACKAGES + BUILD_PACKAGES))


def _bash(script: str):
    return sh(script)


@operation()
def release_debs(label: str, sums_key: str, spec, want: Want):
    """A vendor's release .debs (`spec`: packages, version, url, sha256) at the spec's version:
    nothing to do, or download, check, install (render/debs.py). enroot here, nvidia-mig-parted in mig.py."""
    snap = snapshot(Want(paths=want.paths, services=want.services, blocks=want.blocks,  # the release's packages
                         packages=tuple(dict.fromkeys((*want.packages, *spec.packages)))))  # read, not assumed absent
    have = {p: snap.packages.get(p) for p in spec.packages}
    behind = [p for p, v in have.items() if v is None or upstream_version(v) != spec.version]
    if not behind:
        host.noop(f"{label} {spec.version} installed ({', '.join(spec.packages)})")
        return
    annotate(disruption="none", diff="".join(f"{p}: {have[p] or 'not installed'} -> {spec.version}\n" for p in behind))
    yield _bash(release_debs_script(label, sums_key, spec.packages, spec.version, spec.url, spec.sha256))


def _built(want: Want, so_path: str, mark_path: str, mark_of) -> tuple[str | None, bool, bool]:
    """A SPANK plugin built on the node: the installed libslurm-dev, whether the plugin is there, and whether
    its mark file says it was built as `mark_of(libslurm-dev version)` says it should be."""
    snap = snapshot(want)
    dev = snap.packages.get("libslurm-dev")
    mark = (snap.files.get(mark_path) or {}).get("sha256")
    so = (snap.files.get(so_path) or {}).get("kind") == "file"
    return dev, so, bool(dev and so and mark == hashlib.sha256(mark_of(dev).encode()).hexdigest())


@operation()
def pyxis_build(spec, want: Want):
    """pyxis built against the Slurm installed here: nothing to do when the plugin is in place and
    was built from this version against this libslurm-dev; else fetch, check, build, install."""
    dev, so, current = _built(want, PYXIS_SO, PYXIS_MARK, lambda dev: pyxis_mark(spec, dev))
    if current:
        host.noop(f"pyxis {spec.version} built against Slurm {upstream_version(dev)}")
        return
    annotate(disruption="none", diff=f"{PYXIS_SO}: {'rebuilt' if so else 'built'}: pyxis {spec.version} "
                                     f"against the installed Slurm ({dev or 'libslurm-dev to install'})\n")
    yield _bash(pyxis_build_script(spec))


@operation()
def env_plugin_build(want: Want):
    """corral's job environment plugin (render/spank_env.py) built against the Slurm installed here: nothing
    to do when it is in place and its mark names this source and this libslurm-dev; else build it."""
    dev, so, current = _built(want, spank_env.SO, spank_env.MARK, spank_env.mark)
    if current:
        host.noop(f"job environment plugin built against Slurm {upstream_version(dev)}")
        return
    annotate(disruption="none", diff=f"{spank_env.SO}: {'rebuilt' if so else 'built'} against the installed Slurm "
                                     f"({dev or 'libslurm-dev to install'})\n")
    yield _bash(spank_env.build_script())


@deploy("containers")
def containers() -> None:
    node, cluster = host.data.corral_node, host.data.corral_cluster
    nv = cluster.spec.nvidia
    if nv.enroot is not None and "compute" in node.roles:
        register_for_run(Want(packages=tuple(nv.enroot.packages)))  # read with the node's one snapshot
        operations.packages(name="download tools", names=list(FETCH_PACKAGES), want=WANT, together=True)
        release_debs(name=f"enroot {nv.enroot.version}", label="enroot", sums_key="nvidia.enroot.sha256",
                     spec=bundled(cluster, ("nvidia", "enroot")), want=WANT)
        operations.managed_file(name=ENROOT_CONF, path=ENROOT_CONF, content=enroot_conf(nv.enroot), want=WANT)
        users.absent(name="no TaskProlog bound into containers (the job environment plugin replaced it)",
                     paths=[TASK_MOUNTS], want=WANT, what="TaskProlog binds")
    if nv.pyxis is not None and any(r in node.roles for r in SLURM_ROLES):
        operations.packages(name="pyxis build dependencies", names=list(FETCH_PACKAGES + BUILD_PACKAGES), want=WANT, together=True)
        pyxis_build(name=f"pyxis {nv.pyxis.version}", spec=bundled(cluster, ("nvidia", "pyxis")), want=WANT)
        operations.managed_file(name=spank_env.SOURCE_PATH, path=spank_env.SOURCE_PATH, content=spank_env.SOURCE,
                                want=WANT)
        env_plugin_build(name="job environment plugin (in place of a TaskProlog)", want=WANT)
