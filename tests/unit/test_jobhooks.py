"""corral's Slurm prolog/epilog (node/jobhooks.py): the GPU job-mapping files dcgm-exporter reads."""

from __future__ import annotations

import json

import pytest

from corral.node import jobhooks as J


@pytest.mark.parametrize("text,want,refused", [("0", [0], []), ("0,1", [0, 1], []), ("0-2,3", [0, 1, 2, 3], []),
                                                ("", [], []), ("x,3", [3], ["x"]), ("3-9", [3], ["3-9"]),
                                                ("2-1", [], ["2-1"]), ("1,1", [1], [])])
def test_expand_indices_within_the_nodes_gpus(text, want, refused):
    assert J.expand_indices(text, 4) == (want, refused)


def test_gpus_only_from_slurm_job_gpus():
    assert J.job_gpus({"SLURM_JOB_GPUS": "2,3", "SLURM_JOB_ID": "7", "SLURMD_NODENAME": "gpu01"}, 4) == ([2, 3], [])
    assert J.job_gpus({"SLURM_JOB_ID": "7", "SLURMD_NODENAME": "gpu01"}, 4) == ([], [])  # a CPU-only job


def test_node_gpu_count_from_config_else_device_files(tmp_path):
    for name in ("nvidia0", "nvidia1", "nvidiactl", "nvidia-uvm"):
        (tmp_path / name).touch()
    assert J.node_gpu_count({"gpu_count": 8}, str(tmp_path)) == 8
    assert J.node_gpu_count({}, str(tmp_path)) == 2
    assert J.node_gpu_count({"gpu_count": True}, str(tmp_path)) == 2
    assert J.node_gpu_count({}, str(tmp_path / "missing")) == 0


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
    cfg.write_text(json.dumps({"gpu_job_map_dir": str(tmp_path / "map"), "gpu_count": 4}))
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


def test_the_deployed_config_bounds_the_map_by_the_nodes_gpus(tmp_path):
    from corral.deploy.jobhooks import config
    from corral.spec.loader import load_text
    text = ("name: demo\nnodes:\n  - {names: ctl, addresses: [10.0.0.10], roles: [controller]}\n"
            "  - {names: gpu01, addresses: [10.0.0.11], roles: [compute], gpus: {model: h100, count: 4}}\n"
            "  - {names: cpu01, addresses: [10.0.0.12], roles: [compute]}\n")
    (tmp_path / "cluster.yaml").write_text(text)
    c = load_text(text, str(tmp_path / "cluster.yaml"))
    assert json.loads(config(c, c.node("gpu01")))["gpu_count"] == 4
    assert json.loads(config(c, c.node("cpu01")))["gpu_count"] == 0
