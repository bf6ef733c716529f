"""`corral render` on a Slurm spec (workflows/render_files.py): the configuration files per node as plan
would install them, from the cached facts; no secret written (the accounting password is a placeholder,
even when the state dir holds one); nodes without facts named in NOTES.txt; --json prints one object."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from corral.cli.main import main
from corral.render.slurm import render_slurm_conf
from corral.spec.loader import load

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "render"


def test_slurm_files_per_node_no_secret_unknown_facts_named(tmp_path, capsys):
    shutil.copy(GOLDEN / "hetero" / "cluster.yaml", tmp_path / "cluster.yaml")
    cluster = load(tmp_path / "cluster.yaml")
    secret = tmp_path / ".corral" / "secrets" / "db-password"
    secret.parent.mkdir(parents=True)
    secret.write_text("s3cret-from-the-state-dir\n")
    assert main(["render", "-f", str(tmp_path / "cluster.yaml"), "-o", str(tmp_path / "out"), "--json"]) == 0
    done = json.loads(capsys.readouterr().out)
    assert done["ok"] and done["scheduler"] == "slurm"
    ctl = cluster.with_role("controller")[0].name
    assert {"/etc/slurm/slurm.conf", "/etc/slurm/gres.conf", "/etc/slurm/cgroup.conf"} <= set(done["files"][ctl])
    written = (tmp_path / "out" / ctl / "etc/slurm/slurm.conf").read_text()
    assert written == render_slurm_conf(cluster, {})  # no facts cached: what plan would render from the spec
    everything = "".join(p.read_text() for p in (tmp_path / "out").rglob("*") if p.is_file())
    assert "s3cret-from-the-state-dir" not in everything
    acct = cluster.with_role("accounting")
    if acct:
        assert "StoragePass=<secret:not-rendered:" in (tmp_path / "out" / acct[0].name / "etc/slurm/slurmdbd.conf").read_text()
    notes = (tmp_path / "out" / "NOTES.txt").read_text()
    assert "No hardware facts for" in notes and "Secrets are never written" in notes
    compute = cluster.with_role("compute")[0].name
    assert (tmp_path / "out" / compute / "etc/corral/job-env").is_file()
    assert (tmp_path / "out" / compute / "usr/local/sbin/corral-prolog").is_file()  # corral's own programs too
