"""enroot + pyxis with TEST stand-ins (tests/vcluster/standin.py), run on the workbench cluster
(test_workbench.py imports these; its spec gets them from images.py's with_runtime): enroot's .deb is
downloaded, checked against the spec's sha256 and installed on the compute nodes; pyxis' source (a real
SPANK plugin) is built on every node against the installed Slurm and enabled in plugstack.conf, so srun
takes --container-image and slurmstepd runs the plugin; corral's prolog/epilog make and clean each user's
enroot directories; a source that fails its checksum changes nothing."""

from __future__ import annotations

import time

from ruamel.yaml import YAML

from corral.spec.loader import load
from corral.virtual.defaults import EXAMPLE_UID as UID
from corral.workflows.converge import converge
from tests.vcluster.conftest import ssh
from tests.vcluster.standin import ENROOT, build_pyxis_source


def test_pyxis_is_built_against_the_installed_slurm_on_every_node(ctr):
    for n in ("ctl", "gpu01", "login1"):
        dev = ssh(ctr, n, "dpkg-query -W -f='${Version}' libslurm-dev").stdout
        slurm = ssh(ctr, n, "dpkg-query -W -f='${Version}' slurm-client").stdout
        assert dev == slurm and ssh(ctr, n, "cat /usr/local/share/corral/pyxis-build").stdout == f"pyxis 1.0.0 slurm {dev}\n"
    for n in ("ctl", "login1"):  # the controller's copy reaches slurmd (configless); login nodes get their own
        assert "required /usr/local/lib/slurm/spank_pyxis.so container_scope=job runtime_path=/run/pyxis" in \
            ssh(ctr, n, "cat /etc/slurm/plugstack.conf").stdout


def test_srun_takes_the_container_options_and_slurmstepd_runs_the_plugin(ctr):
    for where in ("login1", "ctl"):
        assert "--container-image=IMAGE" in ssh(ctr, where, "srun --help").stdout
        out = ssh(ctr, where, "su alice -c 'srun -A research -w gpu01 --container-image=nvcr.io#nvidia/pytorch:24.01-py3 "
                              "printenv CORRAL_TEST_PYXIS_IMAGE CORRAL_TEST_PYXIS_RUNTIME'").stdout.split()
        assert out == ["nvcr.io#nvidia/pytorch:24.01-py3", "/run/pyxis"], where


def test_enroot_is_installed_and_configured_from_the_spec(ctr):
    assert ssh(ctr, "gpu01", f"dpkg-query -W -f='${{Version}}' {ENROOT}").stdout == "1.0.0-1"
    conf = ssh(ctr, "gpu01", "enroot config").stdout
    assert "ENROOT_RUNTIME_PATH /run/enroot/user-$(id -u)\n" in conf and "ENROOT_MOUNT_HOME n\n" in conf
    assert ssh(ctr, "ctl", f"dpkg-query -W {ENROOT}", check=False).returncode != 0  # compute nodes only
    assert not ssh(ctr, "gpu01", "ls /var/tmp | grep corral-", check=False).stdout  # no download left behind


def test_prolog_makes_the_users_enroot_dirs_and_the_epilog_cleans_them(ctr):
    dirs = f"/run/enroot/user-{UID} /var/lib/enroot/data/user-{UID} /var/lib/enroot/cache/group-{UID}"
    out = ssh(ctr, "ctl", f"su alice -c \"srun -A research -w gpu01 stat -c '%n %U %G %a' {dirs}\"").stdout
    assert out.splitlines() == [f"/run/enroot/user-{UID} alice alice 700", f"/var/lib/enroot/data/user-{UID} alice alice 700",
                                f"/var/lib/enroot/cache/group-{UID} root alice 2770"]  # the group shares its cache
    for _ in range(40):  # the epilog runs after the job ends
        left = ssh(ctr, "gpu01", f"ls -d {dirs} 2>/dev/null", check=False).stdout.split()
        if left == [f"/var/lib/enroot/cache/group-{UID}"]:
            break
        time.sleep(0.25)
    assert left == [f"/var/lib/enroot/cache/group-{UID}"]  # the image cache stays


def test_a_pyxis_source_that_fails_its_checksum_changes_nothing(ctr):
    spec = ctr.cluster.path
    before = spec.read_text()
    build_pyxis_source(spec.parent / "standins", "1.0.1")  # served, but its checksum will not match the spec's
    yaml = YAML()
    data = yaml.load(before)
    data["nvidia"]["pyxis"].update({"version": "1.0.1", "sha256": "0" * 64})
    with spec.open("w") as f:
        yaml.dump(data, f)
    try:
        result = converge(load(spec), "apply", command="test-containers-badsum")
        assert not result.ok
        failed = [o for o in result.nodes["ctl"].ops if o.status == "failed"]
        assert failed and failed[0].name == "containers | pyxis 1.0.1", [o.name for o in failed]
        assert "does not match nvidia.pyxis.sha256; nothing installed" in result.nodes["ctl"].error
        assert ssh(ctr, "ctl", "cat /usr/local/share/corral/pyxis-build").stdout.startswith("pyxis 1.0.0 ")
        out = ssh(ctr, "ctl", "srun -A research -w gpu01 --container-image=x printenv CORRAL_TEST_PYXIS_IMAGE").stdout
        assert out.strip() == "x"  # the installed plugin still works
    finally:
        spec.write_text(before)
