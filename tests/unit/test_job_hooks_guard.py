"""slurm.conf names corral's Prolog/Epilog only when every compute node has them (a missing Prolog
drains the node at its next job): nodes in the run get them first, other nodes count by their
cached facts, which an apply marks once it installed them."""

from __future__ import annotations

from corral.deploy.context import mark_job_hooks
from corral.engine.results import NodeResult, OpResult, RunResult
from corral.facts.hardware import NO_HOOKS, parse_hardware
from corral.facts.slurm import load_hw_cache, save_hw_cache
from corral.facts.records import NodeHW
from corral.render.slurm import render_slurm_conf
from corral.spec.loader import load_text

SPEC = """\
name: lab
nodes:
  - {names: ctl, addresses: [10.0.0.10], roles: [controller]}
  - {names: "gpu[01-03]", addresses: 10.0.0.11-10.0.0.13, roles: [compute], gpus: {model: h100, count: 4}}
"""
LSCPU = ["# Socket,Core,CPU", "0,0,0", "0,1,1", "MemTotal:       16384000 kB"]


def test_the_facts_say_whether_the_prolog_is_installed():
    assert parse_hardware(LSCPU).job_hooks is True
    assert parse_hardware(LSCPU + [NO_HOOKS]).job_hooks is False


def test_slurm_conf_names_the_hooks_only_when_every_compute_node_has_them():
    c = load_text(SPEC, "cluster.yaml")
    full = render_slurm_conf(c, {})
    assert "Prolog=/usr/local/sbin/corral-prolog\nEpilog=/usr/local/sbin/corral-epilog" in full
    guarded = render_slurm_conf(c, {}, without_hooks=["gpu03"])
    assert "Prolog=" not in guarded and "missing on gpu03" in guarded


def test_an_apply_marks_the_nodes_it_gave_the_hooks(tmp_path):
    c = load_text(SPEC, "cluster.yaml")
    before = NodeHW(2, 1, 2, 1, 16000, job_hooks=False)
    save_hw_cache(tmp_path, {"gpu02": before, "gpu03": before})
    r = RunResult(run_id="x", command="apply", mode="apply", spec_hash="h", started="t")
    r.nodes["gpu02"] = NodeResult("gpu02", "10.0.0.12", ops=[OpResult("jobhooks | /usr/local/sbin/corral-prolog", "changed")])
    r.nodes["gpu03"] = NodeResult("gpu03", "10.0.0.13", error="unreachable", ops=[])

    class C:
        state_dir = tmp_path
    mark_job_hooks(C, r)
    cache = load_hw_cache(tmp_path)
    assert cache["gpu02"].job_hooks is True and cache["gpu03"].job_hooks is False
