"""The prolog's GPU job map against what a job user controls (security finding: the prolog parsed
`scontrol show job -d` text, which holds the user's JobName, so a crafted name mapped a CPU-only job
onto other users' GPUs and `IDX:0-2000000` made root create two million files in /run)."""

from __future__ import annotations

import ast
import json
import subprocess
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from corral.node import jobhooks as J

# `scontrol show job -d 77` of a CPU-only job whose name a user chose (sbatch -J '…'); Slurm prints
# JobName= unquoted on the record's first line
CRAFTED = ("x Nodes=gpu01 CPU_IDs=0 Mem=1 GRES=gpu:h100:4(IDX:0-3)",
           "x Nodes=gpu01 GRES=gpu:h100:100(IDX:0-99)",
           "x\n     Nodes=gpu01 CPU_IDs=0-1 Mem=1024 GRES=gpu:h100:2(IDX:2,3)")


def show_job(name: str) -> str:
    return (f"JobId=77 JobName={name}\n   UserId=mallory(1002) GroupId=mallory(1002) MCS_label=N/A\n"
            "   NumNodes=1 NumCPUs=1 NumTasks=1 CPUs/Task=1 ReqB:S:C:T=0:0:*:*\n"
            "   JOB_GRES=(null)\n     Nodes=gpu01 CPU_IDs=0 Mem=1024 GRES=\n"
            "   MinCPUsNode=1 MinMemoryNode=1G MinTmpDiskNode=0\n")


@pytest.fixture
def hooks(tmp_path, monkeypatch):
    """main() with a config of 4 GPUs and a `scontrol` that answers the crafted job's record."""
    cfg = tmp_path / "jobhooks.json"
    cfg.write_text(json.dumps({"gpu_job_map_dir": str(tmp_path / "map"), "gpu_count": 4}))
    monkeypatch.setattr(J, "CONFIG", str(cfg))
    logged: list[str] = []
    monkeypatch.setattr(J.syslog, "syslog", lambda prio, msg: logged.append(msg))
    answer = {"text": ""}

    def fake_run(argv, **kw):
        return subprocess.CompletedProcess(argv, 0, answer["text"], "")
    monkeypatch.setattr(subprocess, "run", fake_run)
    return {"map": tmp_path / "map", "answer": answer, "logged": logged}


@pytest.mark.parametrize("name", CRAFTED)
def test_a_crafted_job_name_maps_a_cpu_only_job_onto_no_gpu(hooks, name):
    hooks["answer"]["text"] = show_job(name)
    env = {"SLURM_JOB_ID": "77", "SLURMD_NODENAME": "gpu01", "SLURM_JOB_UID": "1002"}
    assert J.main(["prolog"], env) == 0
    assert not hooks["map"].exists() or list(hooks["map"].iterdir()) == []


def test_indices_beyond_the_nodes_gpus_are_never_mapped(hooks):
    """Slurm's own SLURM_JOB_GPUS is bounded by the node's GPUs too: no file past gpu_count."""
    assert J.main(["prolog"], {"SLURM_JOB_ID": "78", "SLURM_JOB_GPUS": "2-99"}) == 0
    assert sorted(p.name for p in hooks["map"].iterdir()) == ["2", "3"]
    assert any("outside this node's 4 GPUs" in m for m in hooks["logged"]), hooks["logged"]


@settings(max_examples=300, deadline=None)
@given(text=st.one_of(st.text(max_size=60), st.from_regex(r"[0-9,\- ]{0,40}", fullmatch=True)),
       limit=st.integers(0, 16))
def test_no_text_maps_an_index_outside_the_nodes_gpus(text, limit):
    gpus, _ = J.expand_indices(text, limit)
    assert all(0 <= i < limit for i in gpus) and len(gpus) == len(set(gpus)) <= limit


@settings(max_examples=200, deadline=None)
@given(env=st.dictionaries(st.sampled_from(["SLURM_JOB_NAME", "SLURM_JOB_COMMENT", "SLURM_JOB_ID", "SLURMD_NODENAME",
                                            "SLURM_JOB_CONSTRAINTS", "CUDA_VISIBLE_DEVICES", "SLURM_JOB_UID"]),
                           st.text(max_size=40)))
def test_a_job_without_slurm_job_gpus_has_no_gpu_whatever_else_it_says(env):
    assert J.job_gpus(env, 8) == ([], [])


def test_the_hooks_never_ask_slurm_for_job_text():
    """The rule behind the finding: nothing a user names (JobName, Comment) is parsed by the root hooks."""
    for name in ("jobhooks.py", "jobdirs.py"):
        tree = ast.parse((Path(J.__file__).parent / name).read_text())
        calls = [c for c in ast.walk(tree) if isinstance(c, ast.Call)]
        strings = [n.value for c in calls for n in ast.walk(c) if isinstance(n, ast.Constant) and isinstance(n.value, str)]
        assert not [s for s in strings if s.split()[:1] == ["scontrol"] or "show job" in s or "JobName" in s], name
