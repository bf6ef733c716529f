"""enroot + pyxis on a real virtual cluster with TEST stand-ins (tests/vcluster/standin.py): enroot's
.deb is downloaded, checked against the spec's sha256 and installed; pyxis' source (a real SPANK
plugin) is built on every node against the installed Slurm and enabled in plugstack.conf, so srun
takes --container-image and slurmstepd runs the plugin; corral's prolog/epilog make and clean each
user's enroot directories; a source that fails its checksum changes nothing."""

from __future__ import annotations

import hashlib
import json
import time

import pytest

from corral.workflows.converge import converge
from corral.spec.loader import load
from corral.virtual.repo import start_server, stop_server
from tests.vcluster.conftest import TEST_SUBNET, make_spec, ssh, vcluster_unavailable
from tests.vcluster.standin import ENROOT, PYXIS, build_enroot_deb, build_pyxis_source

pytestmark = pytest.mark.vcluster
PORT = 18082
UID = 2001
GATEWAY = str(TEST_SUBNET.network_address + 1)
SECTION = """\
allow_http: true  # the stand-ins are served on the bridge (plain http, sha256-checked)
nvidia:
  enroot:
    version: 1.0.0
    packages: [{enroot}]
    url: "http://{gw}:{port}/{{package}}_{{version}}_{{arch}}.deb"
    sha256: {{{enroot}: {deb_sha}}}
    settings: {{ENROOT_MOUNT_HOME: "n"}}
  pyxis:
    version: {pyxis}
    url: "http://{gw}:{port}/{name}-{{version}}.tar.gz"
    sha256: "{src_sha}"
    args: {{runtime_path: /run/pyxis, container_scope: job}}
"""


def sha(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def ctr(tmp_path_factory):
    reason = vcluster_unavailable()
    if reason:
        pytest.skip(reason)
    from corral.virtual.cluster import VirtualCluster
    work = tmp_path_factory.mktemp("vcctr")
    files = work / "files"
    files.mkdir()
    deb, src = build_enroot_deb(files, "1.0.0"), build_pyxis_source(files, "1.0.0")
    build_pyxis_source(files, "1.0.1")  # served, but its checksum will not match the spec's
    path = make_spec(work, name="cctr", compute=1)
    base = path.read_text().replace("users: [root]", "users: [root, alice]").replace(
        "slurm:\n", f"  - {{names: login1, addresses: [{TEST_SUBNET.network_address + 30}], roles: [login]}}\nslurm:\n", 1)
    path.write_text(base + SECTION.format(enroot=ENROOT, gw=GATEWAY, port=PORT, deb_sha=sha(deb), pyxis="1.0.0",
                                          name=PYXIS, src_sha=sha(src)))
    vc = VirtualCluster(load(path))
    server = None
    try:
        vc.up()
        server = start_server(files, GATEWAY, PORT, work / "files.log")
        for n in ("ctl", "gpu01", "login1"):
            ssh(vc, n, f"id alice >/dev/null 2>&1 || useradd -m -u {UID} alice")
        vc.base_spec, vc.sums = base, (sha(deb), sha(src))  # noqa: B010
        result = converge(vc.cluster, "apply", command="test-containers")
        assert result.ok, json.dumps(result.to_json(), indent=1)[:4000]
        vc.first = result  # noqa: B010
        yield vc
    finally:
        if server:
            stop_server(server)
        vc.down()


def test_pyxis_is_built_against_the_installed_slurm_on_every_node(ctr):
    for n in ("ctl", "gpu01", "login1"):
        dev = ssh(ctr, n, "dpkg-query -W -f='${Version}' libslurm-dev").stdout
        slurm = ssh(ctr, n, "dpkg-query -W -f='${Version}' slurm-client").stdout
        assert dev == slurm and ssh(ctr, n, "cat /usr/local/share/corral/pyxis-build").stdout == f"pyxis 1.0.0 slurm {dev}\n"
    for n in ("ctl", "login1"):  # the controller's copy reaches slurmd (configless); login nodes get their own
        assert "required /usr/local/lib/slurm/spank_pyxis.so container_scope=job runtime_path=/run/pyxis" in \
            ssh(ctr, n, "cat /etc/slurm/plugstack.conf").stdout


@pytest.mark.parametrize("where", ["login1", "ctl"])
def test_srun_takes_the_container_options_and_slurmstepd_runs_the_plugin(ctr, where):
    assert "--container-image=IMAGE" in ssh(ctr, where, "srun --help").stdout
    out = ssh(ctr, where, "su alice -c 'srun -A research -w gpu01 --container-image=nvcr.io#nvidia/pytorch:24.01-py3 "
                          "printenv CORRAL_TEST_PYXIS_IMAGE CORRAL_TEST_PYXIS_RUNTIME'").stdout.split()
    assert out == ["nvcr.io#nvidia/pytorch:24.01-py3", "/run/pyxis"]


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


def test_second_apply_changes_nothing(ctr):
    result = converge(load(ctr.cluster.path), "apply", command="test-containers-noop")
    assert result.ok and result.changed == 0, [(n, o.name) for n, r in result.nodes.items() for o in r.ops
                                               if o.status == "changed"]


def test_a_source_that_fails_its_checksum_changes_nothing(ctr, tmp_path):
    spec = ctr.cluster.path
    spec.write_text(ctr.base_spec + SECTION.format(enroot=ENROOT, gw=GATEWAY, port=PORT, deb_sha=ctr.sums[0],
                                                   pyxis="1.0.0", name=PYXIS, src_sha="0" * 64)
                    .replace("pyxis:\n    version: 1.0.0", "pyxis:\n    version: 1.0.1"))
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
        spec.write_text(ctr.base_spec + SECTION.format(enroot=ENROOT, gw=GATEWAY, port=PORT, deb_sha=ctr.sums[0],
                                                       pyxis="1.0.0", name=PYXIS, src_sha=ctr.sums[1]))
