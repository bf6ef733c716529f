"""The release rows not run on a live node (spec/releases.py: ubuntu-22.04, ubuntu-24.04, rocky-9), offline:
doctor names each release from its captured /etc/os-release (tests/fixtures/releases/, sources in its
README) and says which are not live-tested; spec check warns about the Ubuntu rows and refuses, where the
spec names it, a release corral cannot deploy (Rocky 9: dnf) or the virtual cluster cannot build; the
Ubuntu rows' data agree with the package candidates captured from Ubuntu's archive."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import typer

from corral.checks.doctor import _os
from corral.checks.doctor_facts import SCRIPT, parse
from corral.cli.common import _os_choice
from corral.components.views import package_reasons
from corral.errors import SpecError
from corral.render.lmod import LMOD, MPI_BUILD, MPI_RUN
from corral.render.sssd import PACKAGES as SSSD_PACKAGES
from corral.spec.loader import load_text
from corral.spec.releases import RELEASES, deployable, release
from corral.spec.rules import spec_warnings
from corral.spec.slurm_keys import release_keys
from tests.unit.test_components import EVERYTHING

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "releases"
NOT_LIVE = "not run on a live node by corral's tests"


def spec(os_name: str, virtual: bool = False) -> str:
    return ("name: lab\n" + ("virtual: {subnet: 10.213.99.0/24}\n" if virtual else "") + "nodes:\n"
            "  - names: ctl\n    addresses: [10.213.99.10]\n    roles: [controller]\n    os: " + os_name + "\n"
            "  - names: gpu01\n    addresses: [10.213.99.11]\n    roles: [compute]\n    os: " + os_name + "\n")


def on(os_name: str, text: str) -> str:
    """EVERYTHING (every role and feature that installs a package) with every node group on `os_name`."""
    return (text.replace("  - {names:", f"  - {{os: {os_name}, names:")
            .replace("  - names: gpu01\n", f"  - names: gpu01\n    os: {os_name}\n"))


def os_fact(name: str) -> str:
    """What doctor's one command prints for /etc/os-release on a node of `name` (its first line, run by sh
    on the captured file), as its parser reads it."""
    line = SCRIPT.strip().splitlines()[0].replace("/etc/os-release", str(FIXTURES / f"{name}.os-release"))
    out = subprocess.run(["sh", "-c", line], capture_output=True, text=True, check=True, timeout=10).stdout
    return parse(out.splitlines())["os"]


@pytest.mark.parametrize(("name", "fact", "status"), [
    ("debian-12", "debian 12", "OK"), ("debian-13", "debian 13", "OK"),
    ("ubuntu-22.04", "ubuntu 22.04", "WARN"), ("ubuntu-24.04", "ubuntu 24.04", "WARN")])
def test_doctor_names_each_release_from_its_os_release_and_says_which_are_not_live_tested(name, fact, status):
    assert os_fact(name) == fact
    node = load_text(spec(name), "cluster.yaml").node("gpu01")
    got, message = _os(node, {"os": os_fact(name)})
    assert got == status and message.startswith(f"{name} ({release(name).suite}), as the spec says")
    assert (NOT_LIVE in message) == (status == "WARN")


def test_doctor_on_a_rocky_9_node_names_it_and_that_corral_cannot_deploy_it():
    assert os_fact("rocky-9") == "rocky 9.6"  # VERSION_ID has the minor: rocky-9's row takes every 9.x
    status, message = _os(load_text(spec("debian-12"), "cluster.yaml").node("gpu01"), {"os": os_fact("rocky-9")})
    assert status == "FAIL" and message.startswith("runs rocky-9: corral cannot deploy it yet (it installs with dnf")


@pytest.mark.parametrize("name", ["ubuntu-22.04", "ubuntu-24.04"])
def test_spec_check_takes_an_ubuntu_release_and_warns_it_is_not_live_tested(name):
    warned = [w for w in spec_warnings(load_text(spec(name), "cluster.yaml")) if name in w]
    assert warned == [f"os {name} (ubuntu {release(name).suite}, Slurm {release(name).slurm}): {NOT_LIVE} (written "
                      "from its package lists and tested offline; docs/releases.md)"]
    assert not [w for w in spec_warnings(load_text(spec("debian-13"), "cluster.yaml")) if NOT_LIVE in w]


def test_spec_check_refuses_rocky_9_where_the_spec_names_it_saying_what_is_missing():
    with pytest.raises(SpecError) as e:
        load_text(spec("rocky-9"), "cluster.yaml")
    text = str(e.value)
    assert text.startswith("cluster.yaml:6:9: ") and "\ncluster.yaml:10:9: " in text  # each group's own `os:` line
    assert ("rocky-9: corral cannot deploy these nodes yet: its package steps (install, Slurm's version pin, "
            "upgrades and holds) are apt's, and rocky-9 installs with dnf (Slurm 22.05.9-1.el9: "
            "slurm-slurmctld, slurm-slurmd, slurm-slurmdbd, slurm, slurm-pam_slurm, slurm-devel)") in text
    assert "fix: run these nodes on debian-12, debian-13, ubuntu-22.04, ubuntu-24.04" in text
    assert "one major release" not in text  # a release refused is not also compared with the others' Slurm


@pytest.mark.parametrize("name", ["ubuntu-22.04", "ubuntu-24.04"])
def test_the_virtual_cluster_refuses_what_it_cannot_build(name):
    with pytest.raises(SpecError, match=rf"cluster.yaml:7:9: .*{name}: the virtual cluster builds Debian nodes only"):
        load_text(spec(name, virtual=True), "cluster.yaml")
    with pytest.raises(typer.BadParameter, match="the virtual cluster builds Debian nodes only"):
        _os_choice(name)
    assert _os_choice("debian-13") == "debian-13"


def test_every_deployable_release_has_its_slurm_manual_read():
    """slurm.extra is checked against the target release's own slurm.conf(5): a deployable row's Slurm
    major must have been read (spec/slurm_conf_keys.py), or its keys would go unchecked."""
    for name, rel in RELEASES.items():
        assert release_keys(rel.slurm, "global"), (name, rel.slurm)
    assert [n for n, r in RELEASES.items() if not deployable(r)] == ["rocky-9"]


def _candidates(name: str) -> dict[str, str]:
    lines = (FIXTURES / f"{name}.candidates").read_text().splitlines()
    return dict(line.split() for line in lines if line and not line.startswith("#"))


@pytest.mark.parametrize("name", ["ubuntu-22.04", "ubuntu-24.04"])
def test_every_package_corral_installs_is_in_the_ubuntu_release_under_the_same_name(name):
    """Captured from Ubuntu's archive: a package a component starts to declare fails here until it is
    checked there (and renamed in the row if Ubuntu calls it otherwise)."""
    found, rel = _candidates(name), release(name)
    cluster = load_text(on(name, EVERYTHING), "/tmp/corral-rows/cluster.yaml")
    assert {n.os for n in cluster.nodes} == {name}
    declared = set(package_reasons(cluster, real=True))
    declared |= {*LMOD, *MPI_RUN, *MPI_BUILD, *SSSD_PACKAGES}  # software: and identity.ldap, not in EVERYTHING
    assert sorted(rel.package(p) for p in declared if rel.package(p) not in found) == []
    # the row's Slurm and Open MPI are the archive's
    assert found["slurmd"] == found["slurm-client"] == found["libpam-slurm-adopt"] == rel.slurm_package
    assert rel.slurm_package.startswith(rel.slurm + ".") and found["openmpi-bin"].startswith(rel.openmpi + ".")


def test_doctor_says_on_its_spec_line_which_releases_are_not_live_tested():
    from corral.checks.doctor import evaluate
    check = next(c for c in evaluate(load_text(spec("ubuntu-22.04"), "cluster.yaml"), {}, {}).checks
                 if c.name == "spec")
    assert check.status == "WARN" and f"os ubuntu-22.04 (ubuntu jammy, Slurm 21.08): {NOT_LIVE}" in check.message
    check = next(c for c in evaluate(load_text(spec("debian-12"), "cluster.yaml"), {}, {}).checks if c.name == "spec")
    assert check.status == "OK"


@pytest.mark.parametrize(("name", "major"), [("debian-12", "22.05"), ("debian-13", "24.11"), ("ubuntu-22.04", "21.08"),
                                             ("ubuntu-24.04", "23.11")])
def test_corral_render_writes_slurm_conf_for_the_slurm_the_controllers_release_ships(name, major):
    """Without slurm.version, `corral render` renders for the controller's release's Slurm, as plan does
    when it cannot read the controller's (deploy/context.py), not for Debian 12's."""
    from corral.workflows.render_slurm import slurm_files
    per_node, notes = slurm_files(load_text(spec(name), "/tmp/corral-rows/cluster.yaml"), {})
    assert per_node["ctl"]["/etc/slurm/slurm.conf"].splitlines()[1] == f"# Slurm {major}"
    assert f"Slurm configuration rendered for Slurm {major}, which {name} ships" in notes[0]
