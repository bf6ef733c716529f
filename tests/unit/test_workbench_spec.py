"""`software:` and `slurm.clean_jobs` without a node: the spec's located errors, the renderers (Lmod's
MODULEPATH list, the modulefiles, job_container.conf keyed on the Slurm version, slurm.conf's lines),
the packages the declaration gives each node and where the component applies."""

from __future__ import annotations

import textwrap

import pytest

from corral.components import gates
from corral.components.views import node_packages
from corral.deploy.software import ACCEPTANCE, modulefiles
from corral.errors import SpecError
from corral.render.job_container import job_container_conf, mpi_conf, slurm_lines as job_lines
from corral.render.lmod import lua_string, modulespath, openmpi_module
from corral.render.slurm import render_slurm_conf
from corral.spec.loader import load_text

BASE = textwrap.dedent("""\
    name: lab
    nodes:
      - {names: ctl, addresses: [10.0.0.10], roles: [controller, accounting, nfs]}
      - {names: "gpu[01-02]", addresses: [10.0.0.11, 10.0.0.12], roles: [compute], gpus: {model: h100, count: 4}}
      - {names: login1, addresses: [10.0.0.13], roles: [login]}
    storage:
      exports: [{path: /srv/nfs/sw}]
      mounts: [{path: /sw, export: /srv/nfs/sw}]
    """)


def problems(extra: str, base: str = BASE) -> list[str]:
    with pytest.raises(SpecError) as err:
        load_text(base + extra, "cluster.yaml")
    return [f"{p.where}: {p.message}" for p in err.value.problems]


def loads(extra: str, base: str = BASE):
    return load_text(base + extra, "cluster.yaml")


def test_a_software_root_on_no_shared_mount_is_a_located_error():
    found = problems("software: {root: /opt/sw}\n")
    assert len(found) == 1 and found[0].startswith("cluster.yaml:9:") and "software root is on no shared mount" in found[0]


def test_a_software_root_some_login_or_compute_node_does_not_mount_is_refused():
    base = BASE.replace("mounts: [{path: /sw, export: /srv/nfs/sw}]", "mounts: [{path: /sw, export: /srv/nfs/sw, roles: [compute]}]")
    found = problems("software: {}\n", base)
    assert len(found) == 1 and "login1 do not mount /sw" in found[0], found


def test_a_site_tree_that_is_not_absolute_is_a_located_error():
    found = problems("software:\n  site_trees: [/opt/site, modules/here]\n")
    assert len(found) == 1 and found[0].startswith("cluster.yaml:10:") and "site_trees" in found[0], found


def test_the_whole_file_system_is_not_a_module_tree():
    # found by the hostile-strings fuzz: "/" passed as an absolute path, and Lmod would walk all of it
    found = problems("software:\n  site_trees: [/opt/site, /]\n")
    assert len(found) == 1 and found[0].startswith("cluster.yaml:10:") and "not the whole file system" in found[0]


@pytest.mark.parametrize("tree", ["/opt/$(reboot)", "/opt/a b", "/opt/*", "/opt/x\n/etc"])
def test_a_site_tree_never_holds_shell_or_glob_characters(tree):
    assert problems(f"software:\n  site_trees: [{tree!r}]\n".replace("'", '"'))


def test_clean_jobs_on_25_11_and_later_is_namespace_tmpfs():
    """Slurm 25.11 replaced job_container/tmpfs with namespace/tmpfs: the same job_container.conf, another key."""
    cluster = loads("slurm: {version: \"26.05\", clean_jobs: true}\n")
    assert job_lines(cluster, (26, 5))[-1] == "NamespaceType=namespace/tmpfs"
    assert job_lines(cluster, (25, 5))[-1] == "JobContainerType=job_container/tmpfs"
    assert "JobContainerType" not in "\n".join(job_lines(cluster, (25, 11)))


@pytest.mark.parametrize("installed, requested, refused", [
    ("24.11.5", "26.05", True), ("25.05.3", "25.11", True), ("24.11.5", "25.05", False), ("25.11.1", "26.05", False)])
def test_an_upgrade_across_25_11_with_clean_jobs_is_refused_naming_the_way(installed, requested, refused):
    from corral.spec.slurm_releases import refusal
    found = refusal("gpu01", installed, requested, clean_jobs=True)
    assert (found is not None) == refused, found
    if refused:
        assert "JobContainerType=job_container/tmpfs -> NamespaceType=namespace/tmpfs" in found[0]
        assert found[1].startswith("set slurm.clean_jobs: false and apply the upgrade")
    assert refusal("gpu01", installed, requested) is None  # without clean jobs: nothing to refuse


@pytest.mark.parametrize("path, what", [("/tmp/jobs", "Slurm refuses a BasePath there"),
                                        ("/dev/shm", "Slurm refuses a BasePath there"),
                                        ("/sw/jobtmp", "on the shared mount /sw")])
def test_the_job_tmp_path_is_on_local_disk(path, what):
    found = problems(f"slurm: {{clean_jobs: true, job_tmp_path: {path}}}\n")
    assert len(found) == 1 and what in found[0] and found[0].startswith("cluster.yaml:9:"), found


def test_job_container_conf_follows_the_slurm_version():
    cluster = loads("slurm: {clean_jobs: true, job_tmp_path: /local/jobtmp}\n")
    old = job_container_conf(cluster, (22, 5))
    assert "AutoBasePath=true\nBasePath=/local/jobtmp\n" in old and "Dirs=" not in old
    assert job_container_conf(cluster, (24, 11)).endswith("BasePath=/local/jobtmp\nDirs=/tmp,/dev/shm\n")
    assert job_container_conf(cluster, (26, 5)) == job_container_conf(cluster, (24, 11)).replace("24.11", "26.05")
    assert job_container_conf(loads(""), (22, 5)) is None


def test_mpi_tasks_take_pmix_data_by_message_where_jobs_have_a_private_tmp():
    """PMIx's shared-memory job data sits under the node's /tmp, hidden from a clean job's tasks: mpi.conf
    has them use gds/hash; nothing without clean jobs."""
    lines = [line for line in mpi_conf(loads("slurm: {clean_jobs: true}\n")).splitlines() if not line.startswith("#")]
    assert lines == ["PMIxEnv=PMIX_MCA_gds=hash"]
    assert mpi_conf(loads("")) is None


def test_slurm_conf_names_the_job_container_and_contains_every_job():
    cluster = loads("identity: {pam_slurm_adopt: false}\nslurm: {clean_jobs: true}\n")
    conf = render_slurm_conf(cluster, {})
    assert "JobContainerType=job_container/tmpfs\n" in conf and "PrologFlags=Contain\n" in conf
    plain = render_slurm_conf(loads("identity: {pam_slurm_adopt: false}\n"), {})
    assert "JobContainerType" not in plain and "PrologFlags" not in plain


def test_modulespath_lists_corrals_tree_the_roots_the_sites_then_debians():
    cluster = loads("software: {site_trees: [/opt/site/modules, /apps/mods]}\n")
    dirs = [line for line in modulespath(cluster).splitlines() if not line.startswith("#")]
    assert dirs == ["/usr/local/share/corral/modulefiles", "/sw/modulefiles", "/opt/site/modules", "/apps/mods",
                    "/etc/lmod/modules", "/usr/share/lmod/lmod/modulefiles/"]


def test_the_openmpi_module_is_the_nodes_release_version():
    text = BASE.replace("roles: [login]}", "roles: [login], os: debian-13}")
    cluster = loads("software: {}\nslurm: {version: \"24.11\"}\n", text)
    files = {n.name: modulefiles(cluster, n) for n in cluster.nodes if gates.software_user(cluster, n)}
    assert sorted(files["gpu01"]) == ["/usr/local/share/corral/modulefiles/openmpi/4.1.lua"]
    assert sorted(files["login1"]) == ["/usr/local/share/corral/modulefiles/openmpi/5.0.lua"]
    assert 'setenv("SLURM_MPI_TYPE", "pmix")' in files["gpu01"]["/usr/local/share/corral/modulefiles/openmpi/4.1.lua"]
    assert modulefiles(loads("software: {openmpi: false}\n"), cluster.node("gpu01")) == {}


def test_cuda_and_acceptance_modules_only_where_corral_installs_them():
    extra = ('software: {}\nnvidia: {cuda_toolkit: {version: "12.4"}}\n'
             'acceptance: {burn: {enabled: true, sha256: skip}}\n')
    cluster = loads(extra)
    gpu, login = modulefiles(cluster, cluster.node("gpu01")), modulefiles(cluster, cluster.node("login1"))
    cuda = "/usr/local/share/corral/modulefiles/cuda/12.4.lua"
    assert cuda in gpu and cuda in login and 'local home = "/usr/local/cuda-12.4"' in gpu[cuda]
    assert ACCEPTANCE in gpu and ACCEPTANCE not in login
    assert 'prepend_path("PATH", "/usr/local/lib/corral/gpuburn")' in gpu[ACCEPTANCE]
    virtual = loads(extra + "virtual: {subnet: 10.0.0.0/24}\n")
    # the virtual cluster: its EMULATED toolkit gets the module (virtual/cuda_standin.py); no acceptance tools
    assert sorted(modulefiles(virtual, virtual.node("gpu01"))) == [cuda, "/usr/local/share/corral/modulefiles/openmpi/4.1.lua"]


def test_lua_strings_are_escaped():
    assert lua_string('a"b\\c\nd') == '"a\\"b\\\\c\\nd"'
    assert openmpi_module("4.1").count("whatis(") == 1


def test_packages_and_gates_follow_the_roles():
    cluster = loads("software: {}\n")
    gpu, login, ctl = (node_packages(cluster, cluster.node(n)) for n in ("gpu01", "login1", "ctl"))
    assert {"lmod", "openmpi-bin", "libpmix-dev"} <= set(gpu) and "gcc" not in gpu
    assert {"lmod", "openmpi-bin", "libpmix-dev", "libopenmpi-dev", "gcc", "libc6-dev"} <= set(login)
    assert not {"lmod", "openmpi-bin"} & set(ctl)
    assert gates.software(cluster, cluster.node("ctl")) and gates.software_maker(cluster, cluster.node("ctl"))
    assert not gates.software_user(cluster, cluster.node("ctl"))
    plain = loads("")
    assert not any(gates.software(plain, n) for n in plain.nodes)
    assert "lmod" not in node_packages(plain, plain.node("login1"))


def test_software_is_refused_under_kubernetes():
    base = textwrap.dedent("""\
        name: k
        scheduler: kubernetes
        nodes:
          - {names: cp1, addresses: [10.0.0.10], roles: [control-plane]}
          - {names: w1, addresses: [10.0.0.11], roles: [worker]}
        """)
    found = problems("software: {}\n", base)
    assert any("software: serves Slurm's login and compute nodes" in f for f in found), found
