"""corral's Slurm prolog/epilog (node/jobhooks.py): the GPU job-mapping files dcgm-exporter reads."""

from __future__ import annotations

import json

import pytest

from corral.node import jobhooks as J


@pytest.mark.parametrize("text,want", [("0", [0]), ("0,1", [0, 1]), ("0-2,5", [0, 1, 2, 5]), ("", []),
                                       ("x,3", [3])])
def test_expand_indices(text, want):
    assert J.expand_indices(text) == want


SHOW_JOB = """JobId=42 JobName=wrap
   NumNodes=2 NumCPUs=2 NumTasks=2 CPUs/Task=1 ReqB:S:C:T=0:0:*:*
     Nodes=gpu01 CPU_IDs=0 Mem=1024 GRES=gpu:h100:2(IDX:1,3)
     Nodes=gpu02 CPU_IDs=0 Mem=1024 GRES=gpu:h100:4(IDX:0-3)
   MinCPUsNode=1 MinMemoryNode=1G MinTmpDiskNode=0
"""


def test_indices_from_scontrol_show_job_for_this_node():
    assert J.indices_from_scontrol(SHOW_JOB, "gpu01") == [1, 3]
    assert J.indices_from_scontrol(SHOW_JOB, "gpu02") == [0, 1, 2, 3]


def test_slurm_job_gpus_wins_over_scontrol():
    assert J.job_gpus({"SLURM_JOB_GPUS": "2,3", "SLURM_JOB_ID": "7", "SLURMD_NODENAME": "gpu01"}) == [2, 3]


def test_prolog_maps_and_epilog_unmaps_each_gpu(tmp_path):
    d = str(tmp_path / "gpu-jobs")
    J.map_gpus(d, "41", [0, 1], add=True)
    J.map_gpus(d, "42", [1], add=True)  # a shared GPU (e.g. shards) lists both jobs
    assert (tmp_path / "gpu-jobs" / "0").read_text() == "41\n"
    assert (tmp_path / "gpu-jobs" / "1").read_text() == "41\n42\n"
    J.map_gpus(d, "41", [0, 1], add=False)
    assert sorted(p.name for p in (tmp_path / "gpu-jobs").iterdir()) == ["1"]  # only mapping files in it
    assert (tmp_path / "gpu-jobs" / "1").read_text() == "42\n"
    J.map_gpus(d, "42", [1], add=False)
    assert list((tmp_path / "gpu-jobs").iterdir()) == []


def test_a_hook_never_fails_the_job(tmp_path, monkeypatch):
    monkeypatch.setattr(J, "CONFIG", str(tmp_path / "missing.json"))
    logged = []
    monkeypatch.setattr(J.syslog, "syslog", lambda prio, msg: logged.append(msg))
    assert J.main(["prolog"], {"SLURM_JOB_ID": "5", "SLURM_JOB_GPUS": "0"}) == 0
    assert logged and "corral prolog: job 5" in logged[0]


def test_main_reads_its_config(tmp_path, monkeypatch):
    cfg = tmp_path / "jobhooks.json"
    cfg.write_text(json.dumps({"gpu_job_map_dir": str(tmp_path / "map")}))
    monkeypatch.setattr(J, "CONFIG", str(cfg))
    assert J.main(["prolog"], {"SLURM_JOB_ID": "9", "SLURM_JOB_GPUS": "2"}) == 0
    assert (tmp_path / "map" / "2").read_text() == "9\n"
    assert J.main(["epilog"], {"SLURM_JOB_ID": "9", "SLURM_JOB_GPUS": "2"}) == 0
    assert not (tmp_path / "map" / "2").exists()
    assert J.main(["bogus"], {}) == 2


def test_no_map_dir_configured_does_nothing(tmp_path, monkeypatch):
    cfg = tmp_path / "jobhooks.json"
    cfg.write_text(json.dumps({"gpu_job_map_dir": None}))
    monkeypatch.setattr(J, "CONFIG", str(cfg))
    assert J.main(["prolog"], {"SLURM_JOB_ID": "9", "SLURM_JOB_GPUS": "2"}) == 0
    assert list(tmp_path.iterdir()) == [cfg]
