"""Pure renderers: spec (+ node facts) -> config file text. Deterministic; no I/O."""

from corral.render.cgroup import render_cgroup_conf
from corral.render.gres import render_gres_conf
from corral.facts.records import NodeHW
from corral.render.slurm import render_slurm_conf, slurm_version_tuple
from corral.render.slurmdbd import render_slurmdbd_conf

__all__ = ["NodeHW", "render_cgroup_conf", "render_gres_conf", "render_slurm_conf", "render_slurmdbd_conf",
           "slurm_version_tuple"]
