"""Golden files for the Slurm config renderers: any change to the rendered text is deliberate.

Each case under tests/golden/render/<case>/ has its input (cluster.yaml, hw.json: `slurmd -C`
facts) and the expected files. Rewrite the expected files after a deliberate change with
CORRAL_UPDATE_GOLDEN=1 .venv/bin/python -m pytest tests/unit/test_render_golden.py
and review the diff.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from corral.errors import CorralError
from corral.render import (NodeHW, render_cgroup_conf, render_gres_conf, render_slurm_conf,
                           render_slurmdbd_conf)
from corral.render.job_container import job_container_conf
from corral.render.power import power_config
from corral.render.topology import topology_conf
from corral.render.slurm_lint import lint_configs
from corral.spec.cluster import Cluster
from corral.spec.loader import load, load_text
from corral.virtual.defaults import default_spec

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "render"
UPDATE = os.environ.get("CORRAL_UPDATE_GOLDEN") == "1"
PASSWORD = "golden-db-password"


def _hw(path: Path) -> dict[str, NodeHW]:
    return {k: NodeHW(**v) for k, v in json.loads(path.read_text()).items()} if path.exists() else {}


def _case(name: str) -> tuple[Cluster, dict[str, NodeHW]]:
    d = GOLDEN / name
    if name == "virtual":
        # the spec `corral virtual up` writes; nodes see the host's 2 CPUs and 24 GB
        cluster = load_text(default_spec(), "cluster.yaml")
        return cluster, {n.name: NodeHW(2, 1, 2, 1, 24000) for n in cluster.with_role("compute")}
    return load(d / "cluster.yaml"), _hw(d / "hw.json")


def _render_all(cluster: Cluster, hw: dict[str, NodeHW], version: tuple[int, int]) -> dict[str, str]:
    files = {"slurm.conf": render_slurm_conf(cluster, hw, version=version),
             "gres.conf": render_gres_conf(cluster, version=version),
             "cgroup.conf": render_cgroup_conf(cluster, version=version)}
    if cluster.spec.topology is not None:  # render/topology.py (discovered: from the spec's saved output)
        files["topology.conf"] = topology_conf(cluster)
    if cluster.spec.slurm.clean_jobs:  # render/job_container.py
        files["job_container.conf"] = job_container_conf(cluster, version)
    if cluster.spec.power.enabled:  # the power programs' config (render/power.py)
        files["power.json"] = power_config(cluster)
    if cluster.with_role("accounting"):
        files["slurmdbd.conf"] = render_slurmdbd_conf(cluster, db_password=PASSWORD, version=version)
    return files


def _check(out_dir: Path, files: dict[str, str]) -> None:
    if UPDATE:
        out_dir.mkdir(parents=True, exist_ok=True)
        for name, text in files.items():
            (out_dir / name).write_text(text)
    missing = [n for n in files if not (out_dir / n).exists()]
    assert not missing, f"no golden file {missing} in {out_dir}: run with CORRAL_UPDATE_GOLDEN=1"
    for name, text in files.items():
        assert text == (out_dir / name).read_text(), f"{out_dir.name}/{name} differs from its golden file"


CASES = [("virtual", (22, 5)), ("hetero", (22, 5)), ("hetero", (23, 11)), ("nvml", (22, 5)),
         ("no_accounting", (22, 5)), ("power", (22, 5)), ("fabric_tree", (22, 5)), ("fabric_rail", (22, 5))]


@pytest.mark.parametrize(("case", "version"), CASES, ids=[f"{c}-{v[0]}.{v[1]:02d}" for c, v in CASES])
def test_golden(case, version):
    cluster, hw = _case(case)
    out_dir = GOLDEN / case / f"slurm-{version[0]}.{version[1]:02d}"
    _check(out_dir, _render_all(cluster, hw, version))
    # what controller_config checks before installing: every golden slurm.conf, gres.conf, cgroup.conf lints clean
    assert lint_configs({p.name: p.read_text() for p in sorted(out_dir.glob("*.conf"))}) == []


def test_versions_differ_only_where_slurm_changed():
    """22.05 -> 23.11: CgroupAutomount is defunct (logged as an error) and goes; job_container.conf
    names its Dirs (23.02 on); nothing else changes but the version comment."""
    cluster, hw = _case("hetero")
    old, new = _render_all(cluster, hw, (22, 5)), _render_all(cluster, hw, (23, 11))
    for name in old:
        a = [ln for ln in old[name].splitlines() if not ln.startswith("# Slurm ")]
        b = [ln for ln in new[name].splitlines() if not ln.startswith("# Slurm ")]
        if name == "cgroup.conf":
            assert [ln for ln in a if ln not in b] == ["CgroupAutomount=yes"] and not set(b) - set(a)
        elif name == "job_container.conf":
            assert b == a + ["Dirs=/tmp,/dev/shm"]
        else:
            assert a == b, name


def test_password_only_in_slurmdbd_conf():
    cluster, hw = _case("hetero")
    files = _render_all(cluster, hw, (22, 5))
    assert [n for n, text in files.items() if PASSWORD in text] == ["slurmdbd.conf"]


def test_no_accounting_has_no_slurmdbd_conf():
    cluster, hw = _case("no_accounting")
    with pytest.raises(CorralError, match="accounting"):
        render_slurmdbd_conf(cluster, db_password=PASSWORD)
    settings = [ln for ln in render_slurm_conf(cluster, hw).splitlines() if not ln.startswith("#")]
    for word in ("AccountingStorage", "PriorityType", "PriorityWeight", "Preempt", "QOS="):
        assert not [ln for ln in settings if word in ln], word
