"""Golden renders of the release rows not run on a live node (ubuntu-22.04, ubuntu-24.04, rocky-9): each
file corral renders that depends on the release, from the product's own functions, compared with
tests/golden/releases/<release>/. What differs by release: the Slurm version the configs are written for
(the row's `slurm`), slurmd's unit drop-in (`-D` or `--systemd`, the row's `slurm_notify`), the
pam_slurm_adopt lines (the row's `pam_module_dir`) and the packages each node installs, under the
release's names (the row's `renamed`). Rewrite after a deliberate change with
CORRAL_UPDATE_GOLDEN=1 .venv/bin/python -m pytest tests/unit/test_release_golden.py, and review the diff.

Rocky 9 cannot be loaded as a spec (spec check refuses it: corral has no dnf step), so every release is
rendered from the same debian-12 spec with its nodes put on the release: the configs are what a deploy
would write there, the package names what a dnf step would have to install.
"""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

import pytest

from corral.components.views import node_packages
from corral.deploy.slurm import dropin
from corral.render import NodeHW, render_cgroup_conf, render_gres_conf, render_slurm_conf
from corral.render.adopt import account_block, module_path
from corral.render.slurm_lint import lint_configs
from corral.spec.loader import load, load_text
from corral.spec.releases import RELEASES, release, slurm_tuple
from corral.spec.slurm_keys import release_keys
from tests.unit.test_components import EVERYTHING

ROOT = Path(__file__).resolve().parents[1] / "golden"
GOLDEN = ROOT / "releases"
HETERO = ROOT / "render" / "hetero"
UPDATE = os.environ.get("CORRAL_UPDATE_GOLDEN") == "1"
NOT_LIVE = [n for n, r in RELEASES.items() if not r.live]


def _packages(name: str) -> str:
    """Every node of the spec that installs every Debian package corral declares: its packages, sorted,
    under the release's names (`Release.package`)."""
    cluster, rel = load_text(EVERYTHING, "/tmp/corral-release-golden/cluster.yaml"), release(name)
    lines = [f"# {name}: the packages each node installs ({rel.family}), Debian's name -> {name}'s where it differs"]
    if rel.family != "apt":
        lines.append(f"# (not deployable: names not renamed are Debian's, not checked against {name}'s repositories)")
    for node in cluster.nodes:
        names = [p if rel.package(p) == p else f"{p} -> {rel.package(p)}" for p in sorted(node_packages(cluster, node))]
        lines.append(f"{node.name}: {' '.join(names)}")
    return "\n".join(lines) + "\n"


def _render(name: str) -> dict[str, str]:
    cluster = load(HETERO / "cluster.yaml")
    hw = {k: NodeHW(**v) for k, v in json.loads((HETERO / "hw.json").read_text()).items()}
    version = slurm_tuple(name)
    compute = dataclasses.replace(cluster.node("h100-01"), os=name)
    return {"slurm.conf": render_slurm_conf(cluster, hw, version=version),
            "gres.conf": render_gres_conf(cluster, version=version),
            "cgroup.conf": render_cgroup_conf(cluster, version=version),
            "slurmd.service.d-corral.conf": dropin(cluster, compute),
            "pam.d-sshd-account.txt": "\n".join(account_block(compute.name, module_path(name))) + "\n",
            "packages.txt": _packages(name)}


def test_the_releases_not_run_live_are_the_ubuntu_and_rocky_rows():
    assert NOT_LIVE == ["ubuntu-22.04", "ubuntu-24.04", "rocky-9"]


@pytest.mark.parametrize("name", NOT_LIVE)
def test_golden(name):
    files, out_dir = _render(name), GOLDEN / name
    if UPDATE:
        out_dir.mkdir(parents=True, exist_ok=True)
        for file, text in files.items():
            (out_dir / file).write_text(text)
    missing = [f for f in files if not (out_dir / f).exists()]
    assert not missing, f"no golden file {missing} in {out_dir}: run with CORRAL_UPDATE_GOLDEN=1"
    for file, text in files.items():
        assert text == (out_dir / file).read_text(), f"{name}/{file} differs from its golden file"
    # what controller_config checks before installing, and every key in the release's own slurm.conf(5)
    assert lint_configs({f: files[f] for f in ("slurm.conf", "gres.conf", "cgroup.conf")}) == []
    major = release(name).slurm
    known = {k for kind in ("global", "partition", "node") for k in release_keys(major, kind)}
    for line in files["slurm.conf"].splitlines():
        if line.strip() and not line.startswith("#"):
            used = {w.split("=", 1)[0].lower() for w in line.split() if "=" in w} - {"nodename", "partitionname"}
            assert used <= known, (name, major, used - known)


@pytest.mark.parametrize(("name", "flag", "module"), [
    ("ubuntu-22.04", " -D -s ", "/lib/security/pam_slurm_adopt.so"),
    ("ubuntu-24.04", " --systemd -s ", "/lib/security/pam_slurm_adopt.so"),
    ("rocky-9", " -D -s ", "/usr/lib64/security/pam_slurm_adopt.so")])
def test_the_release_rows_reach_the_rendered_files(name, flag, module):
    """The golden files hold each row's own data: the unit's start mode, the module's path, the version."""
    files = _render(name)
    assert flag in files["slurmd.service.d-corral.conf"]
    assert f"account    required     {module} nodename=h100-01" in files["pam.d-sshd-account.txt"]
    assert files["slurm.conf"].splitlines()[1] == f"# Slurm {release(name).slurm}"


def test_rocky_names_its_packages_as_epel_does_and_ubuntu_as_debian_does():
    assert "slurmd -> slurm-slurmd" in _packages("rocky-9") and "libpam-slurm-adopt -> slurm-pam_slurm" in \
        _packages("rocky-9")
    for name in ("ubuntu-22.04", "ubuntu-24.04"):
        assert "->" not in _packages(name).split("\n", 1)[1]
