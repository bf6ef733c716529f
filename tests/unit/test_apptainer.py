"""images.apptainer (spec/models_images.py, spec/rules_apptainer.py, spec/apptainer_source.py, render/apptainer.py,
virtual/more_repos.py): refused with its key's line and a fix where its package has no source (a Debian 12 group; a
real Debian 13 cluster installing from its own mirror); otherwise Debian's apptainer on login and compute nodes only,
from unstable for Debian 13 in a repository of its own (the virtual cluster's, a bundle's), with its Lmod module."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from corral.components.views import by_name, package_reasons
from corral.errors import SpecError
from corral.spec.loader import load_text

NODES = textwrap.dedent("""\
    name: lab
    nodes:
      - {{names: ctl, addresses: [10.0.0.10], roles: [{ctl}], os: {os}}}
      - {{names: gpu01, addresses: [10.0.0.11], roles: [compute], os: {os}, gpus: {{model: h100, count: 2}}}}
      - {{names: login1, addresses: [10.0.0.12], roles: [login], os: {os}}}
    """)


def spec(tmp_path: Path, os_name: str, apptainer: str, more: str = "", ctl: str = "controller"):
    text = NODES.format(os=os_name, ctl=ctl) + f"images:\n  apptainer: {apptainer}\n" + more
    return load_text(text, str(tmp_path / "cluster.yaml"))


def refusal(tmp_path: Path, *args) -> list[str]:
    with pytest.raises(SpecError) as err:
        spec(tmp_path, *args)
    return [f"{p.where}: {p.message}; fix: {p.fix}" for p in err.value.problems]


def test_debian_12_nodes_are_refused_at_the_key_with_what_to_do(tmp_path):
    out = refusal(tmp_path, "debian-12", "{}")
    assert out == [f"{tmp_path / 'cluster.yaml'}:7:14: no apptainer source for debian-12 nodes (nodes[1]: gpu01): "
                   "corral's is Debian unstable's 1.4.5-2 for debian-13 nodes only (its libraries are newer than "
                   "debian-12's); fix: run these nodes on debian-13, or set images.apptainer.source: mirror where "
                   "the nodes' apt sources (a site mirror) carry an apptainer package"], out


def test_a_real_debian_13_cluster_from_its_own_mirror_is_refused_a_bundle_or_a_site_mirror_is_not(tmp_path):
    out = refusal(tmp_path, "debian-13", "{}")
    assert len(out) == 1 and out[0].startswith(f"{tmp_path / 'cluster.yaml'}:7:14: no apptainer for debian-13 nodes "
                                               "(nodes[1]: gpu01) from the nodes' own apt sources"), out
    assert "fix: build a bundle that carries it (`corral bundle build`) and install from it (packages.source: " \
           "bundle), or set images.apptainer.source: mirror" in out[0], out
    assert spec(tmp_path, "debian-13", "{source: mirror}").spec.images.apptainer.source == "mirror"
    (tmp_path / "b.tar").write_text("")
    bundled = spec(tmp_path, "debian-13", "{}", "packages: {source: bundle, bundle: b.tar, serve: 10.0.0.1:8079}\n")
    assert bundled.spec.images.apptainer.source == "corral"
    assert spec(tmp_path, "debian-12", "{source: mirror}").spec.images.apptainer is not None  # the site's word


def test_a_misspelt_source_is_refused_by_the_model(tmp_path):
    out = refusal(tmp_path, "debian-13", "{source: unstable}", "virtual: {subnet: 10.0.0.0/24}\n")
    assert len(out) == 1 and ":7:" in out[0] and "corral" in out[0] and "mirror" in out[0], out


def test_the_package_is_for_login_and_compute_nodes_and_its_module_names_its_version(tmp_path):
    from corral.deploy.software import modulefiles
    cluster = spec(tmp_path, "debian-13", "{}", "virtual: {subnet: 10.0.0.0/24}\nsoftware: {}\n"
                   "storage: {exports: [{path: /srv/nfs/sw}], mounts: [{path: /sw, export: /srv/nfs/sw}]}\n",
                   ctl="controller, nfs")
    component = by_name(cluster, "apptainer")
    assert {n.name: dict(component.packages(cluster, n)) for n in cluster.nodes} == {
        "ctl": {}, "gpu01": {"apptainer": "images.apptainer"}, "login1": {"apptainer": "images.apptainer"}}
    assert component.daemons(cluster, cluster.nodes[1]) == ()  # no daemon: nothing for `corral audit` to expect
    assert package_reasons(cluster)["apptainer"] == ["images.apptainer"]
    login = next(n for n in cluster.nodes if n.name == "login1")
    files = modulefiles(cluster, login)
    text = files["/usr/local/share/corral/modulefiles/apptainer/1.4.5.lua"]
    assert text.startswith('-- Managed by corral: Apptainer 1.4.5 (Debian\'s apptainer), unprivileged'), text


def test_corrals_set_is_unstables_package_in_a_repository_of_its_own_carried_for_real_nodes_too(tmp_path):
    from corral.virtual.more_repos import wanted
    virtual = spec(tmp_path, "debian-13", "{}", "virtual: {subnet: 10.0.0.0/24}\n")
    [got] = wanted(virtual, "debian-13")
    assert (got.subdir, got.src.suite, got.src.version, got.src.packages, got.real_nodes) == (
        "apptainer", "unstable", "1.4.5-2", ("apptainer",), True)  # Debian's own package: nothing relaxed
    assert wanted(spec(tmp_path, "debian-13", "{source: mirror}", "virtual: {subnet: 10.0.0.0/24}\n"), "debian-13") == []
    both = spec(tmp_path, "debian-13", "{}", "virtual: {subnet: 10.0.0.0/24}\nslurm: {version: '26.05'}\n")
    assert [(s.subdir, s.real_nodes) for s in wanted(both, "debian-13")] == [("slurm-26.05", False), ("apptainer", True)]
