"""The researchers' workbench (issue 36): Lmod with a module tree on shared /sw, Open MPI with Slurm's
PMIx, clean job environments and notebooks, on a usable cluster of its own (ctl also the NFS node,
gpu01-02, login1, alice with her key and a password; /sw exported beside /home; `software: {}`,
`slurm.clean_jobs: true`, `workbench.jupyterhub`, her default QOS `notebook` allowing 2 GPUs).

As alice from login1: `module avail` lists openmpi and a module the site put on /sw; `module load
openmpi` then `mpirun --version` in a login shell and in a batch job; an MPI program she builds with mpicc
runs as 2 tasks on 2 nodes under `srun --mpi=pmix`. A job's /tmp is its own (another user's concurrent
job on the node does not see its file) and gone after it; a process she left on a node outside any job
is ended when her last job there ends, not before. A stuck GPU process (the stand-in nvidia-smi reports
one) drains the node after her job with a reason she can read. Notebooks (tests/vcluster/notebooks.py):
the hub answers over HTTPS with the cluster CA's certificate (every node trusts it), its secrets are
0600 and in no process's argv or corral's journal; in Debian's chromium (Playwright) alice logs in, asks
for 1 GPU, her JupyterLab runs as a Slurm job on a GPU node, a cell prints one GPU, its job id and
`module load openmpi`'s MPI_HOME, she stops it and the job is gone; a form asking more GPUs than her
QOS allows is refused with the reason and submits nothing; bob, who exists only in the directory (a real
slapd on ctl, SSSD on the nodes), logs in to the hub with his directory password and his server runs as
him. EasyBuild (tests/vcluster/easybuild.py): `corral software build` builds a tiny easyconfig whose source
the control host serves, as a Slurm job of the software manager (never root), and alice loads its module
in her login shell and a batch job. The registry and images (images.py) and enroot + pyxis stand-ins
(containers.py) run here too. Apptainer (images.apptainer): alice's GPU job pulls an image from the site registry
and runs it with --nv, seeing the image's OS and exactly her one GPU. The second apply changes nothing."""

from __future__ import annotations

import ipaddress
import json
import re
import shlex
import time

import pytest
from ruamel.yaml import YAML

from corral.spec.loader import load
from corral.virtual.defaults import VIRTUAL_OS
from corral.workflows.converge import converge
from tests.vcluster.conftest import failures, make_spec, ssh, vcluster_unavailable
from tests.vcluster.easybuild import manager_entry
from corral.virtual.repo import start_server, stop_server
from tests.vcluster.images import STANDINS, with_images, with_runtime
from tests.vcluster.test_users import LDAP_PW, _slapd_on_ctl, _tls_files, as_alice

pytestmark = pytest.mark.vcluster

SUBNET = ipaddress.IPv4Network("10.213.93.0/24")  # its own: other modules' clusters may be up
BRIDGE = "corraltest36"
PORT = 18093
APPS = "/run/corral-emulated/compute-apps.json"
# what `corral up` makes (Debian 13, Slurm 24.11, Open MPI 5, podman 5); Debian 12's userland is the shared
# cluster's (conftest.py) and test_bundle's
WORKBENCH_OS = VIRTUAL_OS
BOB_PASSWORD = "bob-in-the-directory-7"  # bob's password in the test directory (notebooks.py logs him in)
HELLO_C = r"""#include <mpi.h>
#include <stdio.h>
int main(int argc, char **argv) {
    int rank, size, len, sum = 0;
    char name[MPI_MAX_PROCESSOR_NAME];
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Get_processor_name(name, &len);
    MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    printf("rank %d of %d on %s sum %d\n", rank, size, name, sum);
    MPI_Finalize();
    return 0;
}
"""


def with_workbench(path) -> None:
    """The usable spec plus /sw (exported by the NFS node, mounted on compute and login nodes), `software:`
    and clean jobs."""
    yaml = YAML()
    data = yaml.load(path.read_text())
    data["storage"]["exports"].append({"path": "/srv/nfs/sw"})
    data["storage"]["mounts"].append({"path": "/sw", "export": "/srv/nfs/sw"})
    data["nvidia"] = {**(data.get("nvidia") or {}), "cuda_toolkit": {"version": "12.4"}}  # EMULATED: a stand-in
    data["software"] = {"easybuild": {}}  # its builds: Slurm jobs of the software manager (easybuild.py)
    data["users"].append(manager_entry())
    data["slurm"]["clean_jobs"] = True
    data["slurm"]["rest"] = {}  # the Slurm REST API too: `corral audit` finds slurmrestd declared (audit.py)
    data["slurm"]["qos"].append({"name": "notebook", "max_gpus_per_user": 2, "max_wall": "4:00:00"})
    for account in data["slurm"]["accounts"]:
        account["qos"].append("notebook")
    for user in data["users"]:
        if user["name"] == "alice":
            user.update(default_qos="notebook", password=True)
    data["workbench"] = {"jupyterhub": {"default_time": "1h"}}
    # a directory too (a real slapd on ctl, started before the first apply): bob exists only there
    ctl = str(SUBNET.network_address + 10)
    tls = _tls_files(path.parent, ctl)
    (path.parent / "ldap-ca.pem").write_text(tls["ca.pem"])
    (path.parent / "ldap-bind").write_text(LDAP_PW + "\n")
    (path.parent / "ldap-bind").chmod(0o600)
    data["identity"] = {**(data.get("identity") or {}), "ldap": {
        "uri": [f"ldaps://{ctl}"], "base": "dc=corral,dc=test", "ca_cert": "ldap-ca.pem",
        "bind_dn": "cn=admin,dc=corral,dc=test", "bind_password_file": "ldap-bind", "min_id": 3000,
        "login_groups": ["bob"]}}  # the hub's sudo rule names its directory users by group
    # the directory server is the site's (this test's), not corral's: declared for `corral audit` (audit.py)
    data["audit"] = {"declared": [{"roles": ["controller"], "unit": "slapd.service", "user": "openldap",
                                   "why": "the test's directory server", "listens": [
                                       {"port": 389, "who": "SSSD on every node"},
                                       {"port": 636, "who": "SSSD on every node"}]}]}
    with path.open("w") as f:
        yaml.dump(data, f)


def with_apptainer(path) -> None:
    """images.apptainer: Debian unstable's apptainer from corral's repository (the nodes run Debian 13)."""
    yaml = YAML()
    data = yaml.load(path.read_text())
    data["images"]["apptainer"] = {}
    with path.open("w") as f:
        yaml.dump(data, f)


@pytest.fixture(scope="module")
def bench(tmp_path_factory):
    reason = vcluster_unavailable()
    if reason:
        pytest.skip(reason)
    from corral.virtual.cluster import VirtualCluster
    path = make_spec(tmp_path_factory.mktemp("bench"), name="wbench", usable=True, subnet=SUBNET, bridge=BRIDGE,
                     port=PORT, os_name=WORKBENCH_OS)
    with_workbench(path)
    gateway = str(SUBNET.network_address + 1)
    with_images(path)  # the images' tests run here too (tests/vcluster/images.py): one cluster, not two
    with_apptainer(path)
    with_runtime(path, path.parent / "standins", gateway)
    vc = VirtualCluster(load(path))
    server = None
    try:
        t0 = time.monotonic()
        vc.up()
        server = start_server(path.parent / "standins", gateway, STANDINS, path.parent / "standins.log")
        _slapd_on_ctl(vc, {n: (path.parent / n).read_text() for n in ("ca.pem", "server.pem", "server.key")})
        ssh(vc, "ctl", f"ldappasswd -x -H ldap://127.0.0.1 -D cn=admin,dc=corral,dc=test -w {LDAP_PW} "
                       f"-s {BOB_PASSWORD} uid=bob,ou=people,dc=corral,dc=test")
        result = converge(vc.cluster, "apply", command="test-workbench-apply")
        assert result.ok, failures(result)
        print(f"workbench cluster up and applied in {time.monotonic() - t0:.0f} s")
        yield vc
    finally:
        if server:
            stop_server(server)
        vc.down()


@pytest.fixture(scope="module")
def reg(bench):
    """The images' tests (tests/vcluster/images.py) name the cluster `reg`: this module's."""
    return bench


def openmpi(vc) -> str:  # the release's Open MPI, its module's version (spec/releases.py)
    from corral.spec.releases import release
    return release(vc.os).openmpi


def login_shell(vc, script: str, timeout: int = 120):
    """`script` in alice's login shell on login1 (what she gets when she logs in)."""
    return as_alice(vc, "login1", f"bash -lc {shlex.quote(script)}", timeout=timeout)


def job_state(vc, job: str) -> str:
    return ssh(vc, "ctl", f"squeue -h -j {job} -o %T", check=False).stdout.strip()


def wait_for(predicate, what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.5)


def node_idle(vc, node: str) -> bool:
    return ssh(vc, "ctl", f"sinfo -h -n {node} -o %T").stdout.strip() == "idle"


def test_module_avail_and_load_in_her_login_shell(bench):
    ssh(bench, "ctl", "mkdir -p /srv/nfs/sw/modulefiles/hello && printf '%s\\n' "
                      "'setenv(\"HELLO_FROM\", \"the site tree on /sw\")' > /srv/nfs/sw/modulefiles/hello/1.0.lua")
    out = login_shell(bench, "module -t avail 2>&1; module load openmpi hello cuda && mpirun --version && "
                             "nvcc --version && echo \"CUDA_HOME=$CUDA_HOME\" && "
                             "echo \"MPI_HOME=$MPI_HOME SLURM_MPI_TYPE=$SLURM_MPI_TYPE HELLO_FROM=$HELLO_FROM\"")
    text = out.stdout + out.stderr
    assert f"openmpi/{openmpi(bench)}" in text and "hello/1.0" in text and "cuda/12.4" in text, text
    assert "release 12.4" in text and "CUDA_HOME=/usr/local/cuda-12.4" in text, text  # the EMULATED toolkit
    assert f"mpirun (Open MPI) {openmpi(bench)}." in text, text
    assert "MPI_HOME=/usr/lib/x86_64-linux-gnu/openmpi SLURM_MPI_TYPE=pmix HELLO_FROM=the site tree on /sw" in text, text
    path = ssh(bench, "login1", "cat /etc/lmod/modulespath").stdout
    assert "/usr/local/share/corral/modulefiles\n" in path and "/sw/modulefiles\n" in path, path


def test_module_load_in_her_batch_job(bench):
    script = ("#!/bin/bash -l\nmodule -t avail 2>&1 | grep -E '^(openmpi|hello|cuda)/[0-9]'\n"
              "module load openmpi hello cuda\nmpirun --version | head -1\necho \"$(hostname) $HELLO_FROM $CUDA_HOME\"\n")
    as_alice(bench, "login1", f"printf '%s' {shlex.quote(script)} > ~/modules.sh")
    job = as_alice(bench, "login1", "cd ~ && sbatch --parsable --wait -w gpu01 -t 2 --output=modules-%j.out "
                                    "modules.sh").stdout.strip()
    out = as_alice(bench, "login1", f"cat ~/modules-{job}.out").stdout
    assert sorted(out.splitlines()[:3]) == ["cuda/12.4", "hello/1.0", f"openmpi/{openmpi(bench)}"], out
    assert out.splitlines()[3].startswith(f"mpirun (Open MPI) {openmpi(bench)}."), out
    assert out.splitlines()[4:] == ["gpu01 the site tree on /sw /usr/local/cuda-12.4"], out


def test_mpi_hello_over_two_tasks_on_two_nodes_with_pmix(bench):
    as_alice(bench, "login1", f"printf '%s' {shlex.quote(HELLO_C)} > ~/hello.c")
    login_shell(bench, "module load openmpi && mpicc -O2 -o ~/hello ~/hello.c")
    out = login_shell(bench, "module load openmpi && cd ~ && timeout 60 srun --mpi=pmix -N2 -n2 -t 2 ./hello",
                      timeout=90)
    lines = sorted(line for line in out.stdout.splitlines() if line.startswith("rank"))
    assert lines == ["rank 0 of 2 on gpu01 sum 1", "rank 1 of 2 on gpu02 sum 1"], out.stdout + out.stderr


def test_a_jobs_tmp_is_its_own_and_gone_after_it(bench):
    job = as_alice(bench, "login1", "sbatch --parsable -w gpu01 -t 2 --output=/dev/null --wrap "
                                    "'echo secret > /tmp/alice-secret; sleep 60'").stdout.strip()
    try:
        # the job's /tmp is a directory of its own under BasePath (Slurm 22.05: BasePath/<node>/<job>/.<job>)
        mine = f"find /var/lib/slurm/job_tmp -mindepth 1 -maxdepth 2 -name {job}"
        wait_for(lambda: ssh(bench, "gpu01", f"{mine} -exec find {{}} -name alice-secret ';' | grep -q .",
                             check=False).returncode == 0, "alice's job to write its /tmp file")
        assert ssh(bench, "gpu01", "test -e /tmp/alice-secret", check=False).returncode != 0  # not the node's /tmp
        # another user's job on the same node at the same time: a /tmp of its own
        other = ssh(bench, "ctl", "srun -w gpu01 -t 1 sh -c 'ls -A /tmp; stat -c %U /tmp; echo end'").stdout
        assert other.split() == ["root", "end"], other
    finally:
        ssh(bench, "ctl", f"scancel {job}", check=False)
    wait_for(lambda: not job_state(bench, job) and node_idle(bench, "gpu01"), "alice's job to end")
    wait_for(lambda: not ssh(bench, "gpu01", mine).stdout.strip(), "the job's /tmp to go", timeout=20)
    again = as_alice(bench, "login1", "srun -w gpu01 -t 1 sh -c 'ls -A /tmp; echo end'").stdout
    assert again.split() == ["end"], again


def test_her_leftover_process_ends_with_her_last_job_on_the_node(bench):
    # a process of hers outside any job (one an unadopted session or a daemonising tool leaves behind)
    ssh(bench, "gpu02", "runuser -u alice -- setsid -f sleep 1001 </dev/null >/dev/null 2>&1")
    alive = lambda: ssh(bench, "gpu02", "pgrep -u alice -f 'sleep 1001'", check=False).returncode == 0  # noqa: E731
    assert alive()
    first = as_alice(bench, "login1", "sbatch --parsable -w gpu02 -t 2 --output=/dev/null --wrap 'sleep 60'").stdout.strip()
    try:
        wait_for(lambda: job_state(bench, first) == "RUNNING", "her first job to run")
        as_alice(bench, "login1", "srun -w gpu02 -t 1 true")  # a second job ends while the first runs
        time.sleep(1)
        assert alive(), "ended while she still had a job on the node"
    finally:
        ssh(bench, "ctl", f"scancel {first}", check=False)
    wait_for(lambda: not job_state(bench, first) and node_idle(bench, "gpu02"), "her last job to end")
    wait_for(lambda: not alive(), "her leftover process to be ended", timeout=30)


def test_a_stuck_gpu_process_drains_the_node_with_a_reason_she_can_read(bench):
    uuids = ssh(bench, "gpu02", "nvidia-smi --query-gpu=uuid --format=csv,noheader").stdout.split()
    apps = [{"pid": 4242, "gpu_uuid": u, "name": "python", "used_memory_mib": 1024} for u in uuids]
    ssh(bench, "gpu02", f"printf '%s' {shlex.quote(json.dumps(apps))} > {APPS}")
    try:
        job = as_alice(bench, "login1", "sbatch --parsable --wait -w gpu02 --gres=gpu:1 -t 1 --output=/dev/null "
                                        "--wrap true").stdout.strip()
        want = re.compile(rf"corral: GPU processes left after job {job}: GPU \d pid 4242; an admin checks the node, "
                          "then resumes it")

        def drained() -> bool:
            return bool(want.search(ssh(bench, "ctl", "scontrol show node gpu02").stdout))
        wait_for(drained, "the epilog to drain gpu02", timeout=60)
        seen = as_alice(bench, "login1", "sinfo -R -h -o '%N|%E'").stdout  # what users see
        assert any(line.startswith("gpu02|") and want.search(line) for line in seen.splitlines()), seen
        state = ssh(bench, "ctl", "sinfo -h -n gpu02 -o %T").stdout.strip()
        assert state in ("drained", "draining"), state
    finally:
        ssh(bench, "gpu02", f"rm -f {APPS}")
        ssh(bench, "ctl", "scontrol update nodename=gpu02 state=resume", check=False)
    wait_for(lambda: node_idle(bench, "gpu02"), "gpu02 to be resumed")


from tests.vcluster.notebooks import (  # noqa: E402,F401 (run here, on this module's cluster, in this order:
    # validate's check first, before alice ever logged in to the hub, as on a cluster `corral up` just made)
    test_validates_notebook_check_starts_runs_and_stops_a_server,
    test_the_form_refuses_what_her_qos_does_not_allow, test_the_hub_serves_https_with_the_cluster_ca,
    test_alice_gets_a_gpu_notebook_in_a_browser, test_a_directory_user_logs_in_to_the_hub_and_gets_a_server)
from tests.vcluster.attacks_hub import (  # noqa: E402,F401 (the attacker's cases against the hub, as alice)
    test_the_hub_and_its_proxy_do_not_run_as_root, test_attack_a_servers_token_cannot_change_what_the_hub_runs,
    test_attack_a_rest_spawn_sets_nothing_but_the_checked_request,
    test_attack_validates_check_shows_her_server_no_token_beyond_her_own)
from tests.vcluster.attacks_notebook import test_attack_from_her_notebook  # noqa: E402,F401 (in her kernel)
from tests.vcluster.audit import (  # noqa: E402,F401 (every feature on: nothing undeclared; a planted listener)
    test_audit_finds_nothing_undeclared_on_the_cluster_with_every_feature,
    test_a_planted_root_listener_is_reported_and_fails_the_audit)
from tests.vcluster.images import (  # noqa: E402,F401 (run here, on this module's cluster)
    test_every_node_trusts_the_registry_and_it_runs_unprivileged, test_alice_runs_the_pushed_image_in_a_batch_job,
    test_a_second_node_pulls_through_the_cache, test_the_cache_serves_its_images_with_the_upstream_stopped,
    test_registry_metrics_are_scraped, test_the_upstream_password_stays_in_its_file,
    test_her_podman_storage_is_hers_and_nobody_can_make_another_users_first,
    test_she_cannot_delete_an_image_from_the_site_registry,
    test_only_the_push_group_pushes_and_never_over_the_loaders_images,
    test_images_pull_list_a_job_reads_it_rm)
from tests.vcluster.images_bundle import (  # noqa: E402,F401
    test_a_bundled_image_is_loaded_into_the_site_registry_and_alice_runs_it)
from tests.vcluster.easybuild import (  # noqa: E402,F401 (run here, on this module's cluster)
    test_a_failed_build_says_why_and_keeps_its_log, test_easybuild_builds_an_easyconfig_as_a_slurm_job_of_the_software_manager,
    test_alice_loads_what_easybuild_built_in_her_login_shell_and_her_batch_job)
from tests.vcluster.containers import (  # noqa: E402,F401 (enroot + pyxis; the checksum case last of them)
    test_pyxis_is_built_against_the_installed_slurm_on_every_node,
    test_srun_takes_the_container_options_and_slurmstepd_runs_the_plugin,
    test_enroot_is_installed_and_configured_from_the_spec, test_prolog_makes_the_users_enroot_dirs_and_the_epilog_cleans_them,
    test_a_pyxis_source_that_fails_its_checksum_changes_nothing)


# EMULATED: the GPUs' description, the virtual cluster's stand-in for what a driver answers through /dev/nvidia*; bound
# read-only into the container beside the stand-in nvidia-smi (a python3 script) that --nv binds (docs/components/virtual.md)
EMULATED_GPUS = "/etc/corral/emulated-gpus.json"
APPTAINER_JOB = f"""#!/bin/bash -l
#SBATCH -w gpu01 --gres=gpu:1 -t 5 -o /home/alice/apptainer-%j.out -e /home/alice/apptainer-%j.err
module load apptainer
module -t list 2>&1
echo "CUDA_VISIBLE_DEVICES=$CUDA_VISIBLE_DEVICES"
apptainer -q pull -F ~/python.sif docker://ctl:5000/corral/python:1
apptainer -q exec ~/python.sif /bin/sh -c 'command -v nvidia-smi || echo "no nvidia-smi without --nv"'
apptainer -q run --nv --bind {EMULATED_GPUS}:{EMULATED_GPUS}:ro ~/python.sif
"""
# the image's command: its OS, who runs it, the GPUs it sees
GPU_INFO = ("/bin/sh", "-c", '. /etc/os-release; echo "$PRETTY_NAME"; id -un; nvidia-smi -L')


def test_apptainer_runs_a_site_registry_image_with_her_gpu_in_a_job(bench):
    """alice's batch job on gpu01 with one GPU: `module load apptainer`, `apptainer pull docker://` of an image in the
    site registry (a Debian 12 userland with python3, tests/vcluster/oci_image.py; the nodes run Debian 13), then
    `apptainer run --nv` of its command: the container shows the image's OS, runs as her, and lists exactly the GPU
    Slurm gave the job (its stand-in nvidia-smi, which --nv binds, honours CUDA_VISIBLE_DEVICES); without --nv it has none. No setuid
    helper is installed: apptainer ran unprivileged, in a user namespace."""
    from corral.deploy.registry_auth import loader_secret
    from corral.render.registry_auth import LOADER
    from tests.vcluster.images import ctl_address
    from tests.vcluster.oci_image import push, python_layer
    t0 = time.monotonic()
    ca = bench.cluster.state_dir / "secrets" / "ca" / "ca.pem"
    push(f"https://{ctl_address(bench)}:5000", "corral/python", "1", ca, "", raw=python_layer(), cmd=GPU_INFO,
         credentials=(LOADER, loader_secret(bench.cluster)), hosts={"ctl": ctl_address(bench)})
    pushed = time.monotonic()
    as_alice(bench, "login1", f"printf '%s' {shlex.quote(APPTAINER_JOB)} > ~/apptainer.sh")
    job = as_alice(bench, "login1", "sbatch --parsable --wait ~/apptainer.sh", check=False, timeout=300)
    ran = time.monotonic()
    out = as_alice(bench, "login1", f"cat ~/apptainer-{job.stdout.strip()}.out; echo ---; "
                                    f"cat ~/apptainer-{job.stdout.strip()}.err", check=False).stdout
    print(f"apptainer: image pushed in {pushed - t0:.1f} s, job {ran - pushed:.1f} s\n{out}")
    assert job.returncode == 0, (job.stdout, job.stderr, out)
    lines, _, err = out.partition("---\n")
    given = lines.splitlines()[1].removeprefix("CUDA_VISIBLE_DEVICES=")
    gpus = json.loads(ssh(bench, "gpu01", f"cat {EMULATED_GPUS}").stdout)["gpus"]
    mine = next(g for g in gpus if str(g["index"]) == given)
    assert lines.splitlines() == [
        "apptainer/1.4.5", f"CUDA_VISIBLE_DEVICES={given}", "no nvidia-smi without --nv",
        "Debian GNU/Linux 12 (bookworm)", "alice", f"GPU 0: {mine['name']} (UUID: {mine['uuid']})"], (lines, err)
    assert len(gpus) == 4 and not err.strip(), (gpus, err)
    # Debian's package from corral's repository of unstable's apptainer, without the setuid starter (nothing setuid)
    node = ssh(bench, "gpu01", "dpkg-query -W -f='${Version} ${Status}\\n' apptainer apptainer-suid 2>&1; "
                               "find /usr/lib/x86_64-linux-gnu/apptainer -perm -4000; apt-cache policy apptainer | "
                               "grep -o ' [^ ]*/apptainer ./ Packages'", check=False).stdout
    assert sorted(node.splitlines()) == [f" {bench.repo_url()}apptainer ./ Packages", "1.4.5-2 install ok installed",
                                         "dpkg-query: no packages found matching apptainer-suid"], node


@pytest.fixture(scope="module")
def ctr(bench):
    """The containers' tests (tests/vcluster/containers.py) name the cluster `ctr`: this module's."""
    return bench


def test_second_apply_changes_nothing(bench):
    result = converge(bench.cluster, "apply", command="test-workbench-again")
    assert result.ok and result.changed == 0, [
        (n.name, o.name) for n in result.nodes.values() for o in n.ops if o.status == "changed"]


def test_the_hub_goes_with_its_section_and_nothing_else_changes(bench):
    """workbench.jupyterhub taken out of the spec (runs last: the hub is gone after it): plan names what goes,
    apply stops and disables the hub on login1 and removes its files, secrets and state; Prometheus no longer
    scrapes it; the next plan has nothing to change."""
    yaml = YAML()
    data = yaml.load(bench.cluster.path.read_text())
    del data["workbench"]["jupyterhub"]
    path = bench.cluster.path.with_name("cluster-nohub.yaml")
    with path.open("w") as f:
        yaml.dump(data, f)
    cluster = load(path)
    plan = converge(cluster, "plan", command="test-workbench-nohub-plan")
    removal = [o for o in plan.nodes["login1"].ops if o.name.startswith("jupyterhub | notebook hub removed")]
    assert removal and removal[0].status == "changed" and "/etc/corral/jupyterhub/hub.env" in removal[0].diff, \
        [(o.name, o.status) for o in plan.nodes["login1"].ops if o.status != "unchanged"]
    assert "CONFIGPROXY_AUTH_TOKEN" not in json.dumps(plan.to_json())  # a secret's name in a path, never its value
    result = converge(cluster, "apply", command="test-workbench-nohub")
    assert result.ok, failures(result)
    gone = ssh(bench, "login1", "systemctl is-enabled corral-jupyterhub; systemctl is-active corral-jupyterhub; "
                                "ls -d /etc/corral/jupyterhub /var/lib/corral-jupyterhub "
                                "/etc/systemd/system/corral-jupyterhub.service; ss -ltnH 'sport = :8443'",
               check=False).stdout
    assert "enabled" not in gone.split() and "active" not in gone.split() and ":8443" not in gone, gone
    assert "/etc/corral" not in gone, gone
    assert "jupyterhub" not in ssh(bench, "ctl", "cat /etc/prometheus/prometheus.yml").stdout
    again = converge(cluster, "plan", command="test-workbench-nohub-again")
    assert again.ok and again.changed == 0, [
        (n.name, o.name) for n in again.nodes.values() for o in n.ops if o.status == "changed"]
