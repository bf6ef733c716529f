"""Every DeepOps variable `corral import deepops` knows (corral.importers.deepops_vars.KNOWN) is either
mapped — a config with it set gives the cluster.yaml key — or listed by the import with its reason;
never dropped silently, never called unsupported when cluster.yaml supports it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from corral.importers.deepops import import_deepops
from corral.importers.deepops_inventory import read_config
from corral.importers.deepops_vars import KNOWN, LISTED, MAPPED, reason_for
from corral.spec.loader import load_text
from corral.spec.shared import mount_nodes

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "deepops"
CONFIGS = sorted(p for p in FIXTURES.glob("*/config") if p.is_dir())
SMALL = "[all]\nhead ansible_host=10.9.0.1\nn1 ansible_host=10.9.0.11\nn2 ansible_host=10.9.0.12\n" \
        "[slurm-master]\nhead\n[slurm-node]\nn1\nn2\n"
V = '\nnvidia_driver_package_version: "550.127.05"\n'  # a driver version, for the driver's other keys
K8S = "[all]\ncp ansible_host=10.9.0.1\nw1 ansible_host=10.9.0.11\n[kube_control_plane]\ncp\n[kube_node]\nw1\n"
K8S3 = ("[all]\ncp1 ansible_host=10.9.0.1\ncp2 ansible_host=10.9.0.2\ncp3 ansible_host=10.9.0.3\n"
        "w1 ansible_host=10.9.0.11\n[kube_control_plane]\ncp1\ncp2\ncp3\n[kube_node]\nw1\n")
VIP_VARS = "kube_vip_address: 10.9.0.5\nkube_vip_interface: bond0\n"
NFS = ("nfs_exports:\n  - {path: /home, options: '*(rw,sync,no_root_squash)'}\nnfs_mounts:\n  - {mountpoint: /home, "
       "server: '{{ groups[\"slurm-master\"][0] }}', path: /home, options: 'async,vers=3'}\n"
       "nfs_server_group: slurm-master[0]\nnfs_client_group: slurm-node\n")
HA_INV = ("[all]\nh1 ansible_host=10.9.0.1\nh2 ansible_host=10.9.0.2\nn1 ansible_host=10.9.0.11\n"
          "[slurm-master]\nh1\nh2\n[slurm-node]\nn1\n")
HA = ("nfs_exports:\n  - {path: /sw, options: '*(rw,sync,no_root_squash)'}\nnfs_mounts:\n  - {mountpoint: /sw, "
      "server: '{{ groups[\"slurm-master\"][0] }}', path: /sw, options: 'async,vers=3'}\n"
      "nfs_server_group: slurm-master[0]\nnfs_client_group: 'slurm-master[1:],slurm-node'\nslurm_enable_ha: true\n")
# wording that would call a supported setting unsupported
UNSUPPORTED = re.compile(r"has no (NVIDIA|nvidia|driver|enroot|pyxis|CUDA|DCGM|GRES)|no enroot|no NVIDIA driver")


def _nodes(c):
    return {n.name: n.roles for n in c.nodes}


# mapped variable -> (inventory, group_vars/all.yml text, what the cluster.yaml has, expected)
CASES = {
    "ansible_host": (SMALL, "", lambda c: _nodes(c) and next(n.address for n in c.nodes if n.name == "n2"),
                     "10.9.0.12"),
    "ansible_user": (SMALL, "ansible_user: ops\n", lambda c: c.spec.ssh.user, "ops"),
    "ansible_ssh_user": (SMALL, "ansible_ssh_user: ops\n", lambda c: c.spec.ssh.user, "ops"),
    "ansible_port": (SMALL, "ansible_port: 2222\n", lambda c: c.spec.ssh.port, 2222),
    "ansible_ssh_port": (SMALL, "ansible_ssh_port: 2222\n", lambda c: c.spec.ssh.port, 2222),
    "ansible_ssh_private_key_file": (SMALL, "ansible_ssh_private_key_file: /keys/id\n",
                                     lambda c: c.spec.ssh.key, "/keys/id"),
    "ansible_ssh_common_args": (SMALL, "ansible_ssh_common_args: -J ops@bastion\n",
                                lambda c: c.spec.ssh.jump_host, "ops@bastion"),
    "slurm_cluster_name": (SMALL, "slurm_cluster_name: pod7\n", lambda c: c.name, "pod7"),
    "slurm_max_job_timelimit": (SMALL, "slurm_max_job_timelimit: 2-00:00:00\n",
                                lambda c: c.spec.slurm.partitions[0].max_time, "2-00:00:00"),
    "slurm_enable_monitoring": (SMALL, "slurm_enable_monitoring: true\nslurm_monitoring_group: slurm-master\n",
                                lambda c: "monitoring" in _nodes(c)["head"], True),
    "slurm_monitoring_group": (SMALL, "slurm_monitoring_group: slurm-node[1]\n",
                               lambda c: "monitoring" in _nodes(c)["n2"], True),
    "slurm_autodetect_nvml": (SMALL, "slurm_autodetect_nvml: true\n", lambda c: c.spec.slurm.gres_autodetect,
                              "nvml"),
    "slurm_cluster_install_nvidia_driver": (SMALL, "slurm_cluster_install_nvidia_driver: true" + V,
                                            lambda c: c.spec.nvidia.driver.version, "550.127.05"),
    "nvidia_driver_package_version": (SMALL, 'nvidia_driver_package_version: "550.127.05-0ubuntu1"\n',
                                      lambda c: c.spec.nvidia.driver.version, "550.127.05"),
    "nvidia_driver_branch": (SMALL, 'nvidia_driver_branch: "550"' + V, lambda c: c.spec.nvidia.driver.version,
                             "550.127.05"),
    "nvidia_driver_ubuntu_branch": (SMALL, 'nvidia_driver_ubuntu_branch: "550"' + V,
                                    lambda c: c.spec.nvidia.driver.version, "550.127.05"),
    "nvidia_driver_rhel_branch": (SMALL, 'nvidia_driver_rhel_branch: "550"' + V,
                                  lambda c: c.spec.nvidia.driver.version, "550.127.05"),
    "nvidia_driver_ubuntu_use_open_kernel_modules": (SMALL, "nvidia_driver_ubuntu_use_open_kernel_modules: true" + V,
                                                     lambda c: c.spec.nvidia.driver.kernel_modules, "open"),
    "nvidia_driver_ubuntu_install_from_cuda_repo": (SMALL, "nvidia_driver_ubuntu_install_from_cuda_repo: yes" + V,
                                                    lambda c: c.spec.nvidia.driver.source, "cuda"),
    "nvidia_driver_ubuntu_cuda_package": (
        SMALL, "nvidia_driver_ubuntu_install_from_cuda_repo: true\nnvidia_driver_ubuntu_cuda_package: cuda-drivers-550"
        + V, lambda c: c.spec.nvidia.driver.package, "cuda-drivers-550"),
    "nvidia_driver_ubuntu_cuda_repo_baseurl": (
        SMALL, "nvidia_driver_ubuntu_cuda_repo_baseurl: https://m.example/cuda/repos/ubuntu2404/x86_64" + V,
        lambda c: c.spec.nvidia.driver.repo_url, "https://m.example/cuda/repos"),
    "nvidia_driver_rhel_cuda_repo_baseurl": (
        SMALL, "nvidia_driver_rhel_cuda_repo_baseurl: https://m.example/cuda/repos/rhel9/x86_64/" + V,
        lambda c: c.spec.nvidia.driver.repo_url, "https://m.example/cuda/repos"),
    "install_dcgm": (SMALL, "install_dcgm: false\n", lambda c: c.spec.nvidia.dcgm.enabled, False),
    "slurm_cluster_install_cuda": (SMALL, "slurm_cluster_install_cuda: true\ncuda_version: cuda-toolkit-12-4\n",
                                   lambda c: c.spec.nvidia.cuda_toolkit.version, "12.4"),
    "cuda_version": (SMALL, "cuda_version: cuda-toolkit=12.6.2-1\n", lambda c: c.spec.nvidia.cuda_toolkit.version,
                     "12.6"),
    "slurm_install_enroot": (SMALL, "slurm_install_enroot: true\n", lambda c: c.spec.nvidia.enroot is not None, True),
    "slurm_install_pyxis": (SMALL, "slurm_install_pyxis: true\n", lambda c: c.spec.nvidia.pyxis is not None, True),
    "enroot_version": (SMALL, "enroot_version: 3.5.0\n", lambda c: c.spec.nvidia.enroot.version, "3.5.0"),
    "enroot_release": (SMALL, 'enroot_release: "2"\n', lambda c: "_{version}-2_{arch}" in c.spec.nvidia.enroot.url,
                       True),
    "enroot_packages": (SMALL, "enroot_packages: [enroot-hardened, enroot-hardened+caps]\n",
                        lambda c: c.spec.nvidia.enroot.packages, ["enroot-hardened", "enroot-hardened+caps"]),
    "enroot_runtime_path": (SMALL, "enroot_runtime_path: /run/e/user-$(id -u)\n",
                            lambda c: c.spec.nvidia.enroot.runtime_path, "/run/e/user-$(id -u)"),
    "enroot_cache_path": (SMALL, "enroot_cache_path: /var/lib/ec/group-$(id -g)\n",
                          lambda c: c.spec.nvidia.enroot.cache_path, "/var/lib/ec/group-$(id -g)"),
    "enroot_data_path": (SMALL, "enroot_data_path: /tmp/ed/user-$(id -u)\n",
                         lambda c: c.spec.nvidia.enroot.data_path, "/tmp/ed/user-$(id -u)"),
    "enroot_config": (SMALL, "enroot_config: |\n  ENROOT_MOUNT_HOME y\n  ENROOT_CACHE_PATH /var/lib/c/u-$(id -u)\n",
                      lambda c: (c.spec.nvidia.enroot.settings, c.spec.nvidia.enroot.cache_path),
                      ({"ENROOT_MOUNT_HOME": "y"}, "/var/lib/c/u-$(id -u)")),
    "slurm_pyxis_version": (SMALL, "slurm_pyxis_version: 0.20.0\n", lambda c: c.spec.nvidia.pyxis.version, "0.20.0"),
    "slurm_pyxis_tarball_url": (SMALL, "slurm_pyxis_tarball_url: https://m.example/p-{{ slurm_pyxis_version }}.tgz\n",
                                lambda c: c.spec.nvidia.pyxis.url, "https://m.example/p-{version}.tgz"),
    "http_proxy": (SMALL, "http_proxy: http://p.example:3128\n", lambda c: c.spec.proxy.http, "http://p.example:3128"),
    "https_proxy": (SMALL, "https_proxy: http://p.example:3128/\n", lambda c: c.spec.proxy.https,
                    "http://p.example:3128"),
    "no_proxy": (SMALL, "no_proxy: localhost,.corp.example\n", lambda c: c.spec.proxy.no_proxy,
                 ["localhost", ".corp.example"]),
    "users": (SMALL, "users:\n  - {username: ann, uid: 2001, name: Ann Lee, ssh_key: 'ssh-ed25519 " + "A" * 68 + "'}\n",
              lambda c: [(u.name, u.uid, u.full_name, len(u.ssh_keys)) for u in c.spec.users], [("ann", 2001, "Ann Lee", 1)]),
    "groups_to_create": (SMALL, "groups_to_create: [{name: ml, gid: 3000}]\n",
                         lambda c: [(g.name, g.gid) for g in c.spec.groups], [("ml", 3000)]),
    "slurm_default_job_timelimit": (SMALL, "slurm_default_job_timelimit: '01:00:00'\n",
                                    lambda c: c.spec.slurm.partitions[0].extra, {"DefaultTime": "01:00:00"}),
    "slurm_version": (SMALL, 'slurm_version: "24.05.4"\n', lambda c: c.spec.slurm.version, "24.05"),
    "slurm_restrict_node_access": (SMALL, "slurm_restrict_node_access: false\n",
                                   lambda c: c.spec.identity.pam_slurm_adopt, False),
    "slurm_allow_ssh_user": (SMALL, "slurm_allow_ssh_user: [ops]\n", lambda c: c.spec.identity.adopt_exempt_users,
                             ["ops"]),
    "nfs_exports": (SMALL, NFS, lambda c: [(e.path, e.clients, e.options) for e in c.spec.storage.exports],
                    [("/home", "cluster", ["rw", "sync", "root_squash"])]),
    "nfs_mounts": (SMALL, NFS, lambda c: [(m.path, m.export, m.server, m.options) for m in c.spec.storage.mounts],
                   [("/home", "/home", None, ["async", "vers=3"])]),
    "slurm_enable_nfs_server": (SMALL, NFS + "slurm_enable_nfs_server: true\n", lambda c: _nodes(c)["head"][-1], "nfs"),
    "nfs_server_group": (SMALL, NFS.replace("slurm-master[0]", "slurm-node[0]").replace('"slurm-master"', '"slurm-node"')
                         .replace("nfs_client_group: slurm-node", "nfs_client_group: slurm-node[1]"),
                         lambda c: (_nodes(c)["n1"], c.spec.storage.mounts[0].nodes), (("compute", "nfs"), "n2")),
    "slurm_enable_nfs_client_nodes": (SMALL, NFS + "slurm_enable_nfs_client_nodes: false\n",
                                      lambda c: (c.spec.storage.mounts, _nodes(c)["head"][-1]), ([], "login")),
    "nfs_client_group": (SMALL, NFS.replace("nfs_client_group: slurm-node", "nfs_client_group: slurm-node[1]"),
                         lambda c: c.spec.storage.mounts[0].nodes, "n2"),
    "slurm_enable_ha": (HA_INV, HA, lambda c: (_nodes(c)["h2"][0], c.spec.slurm.state_save_location,
                                               [n.name for n in mount_nodes(c, c.spec.storage.mounts[0])],
                                               c.spec.storage.exports[0].options),
                        ("controller", "/sw/slurm", ["h1", "h2", "n1"], ["rw", "sync", "no_root_squash"])),
    "slurm_ha_state_save_location": (HA_INV, HA + "slurm_ha_state_save_location: /sw/ctld\n",
                                     lambda c: c.spec.slurm.state_save_location, "/sw/ctld"),
    "gpu_operator_driver_version": (K8S, "gpu_operator_driver_version: 580.126.20\n",
                                    lambda c: c.spec.nvidia.driver.version, "580.126.20"),
    "kube_version": (K8S, "kube_version: v1.29.7\n", lambda c: c.spec.kubernetes.version, "1.29.7"),
    "kube_pods_subnet": (K8S, "kube_pods_subnet: 10.233.64.0/18\n", lambda c: str(c.spec.kubernetes.pod_cidr),
                         "10.233.64.0/18"),
    "kube_service_addresses": (K8S, "kube_service_addresses: 10.233.0.0/18\n",
                               lambda c: str(c.spec.kubernetes.service_cidr), "10.233.0.0/18"),
    "kube_network_plugin": (K8S, "kube_network_plugin: cilium\n", lambda c: c.spec.kubernetes.cni.plugin, "cilium"),
    "k8s_gpu_mig_strategy": (K8S, "k8s_gpu_mig_strategy: single\n",
                             lambda c: c.spec.kubernetes.gpu_operator.mig_strategy, "single"),
    "gpu_operator_preinstalled_nvidia_software": (K8S, "gpu_operator_preinstalled_nvidia_software: true\n",
                                                  lambda c: c.spec.kubernetes.gpu_operator.driver.source,
                                                  "preinstalled"),
    "kube_vip_address": (K8S3, VIP_VARS, lambda c: str(c.spec.kubernetes.control_plane_endpoint.address),
                         "10.9.0.5"),
    "kube_vip_interface": (K8S3, VIP_VARS, lambda c: c.spec.kubernetes.control_plane_endpoint.interface, "bond0"),
    "kube_vip_enabled": (K8S3, VIP_VARS + "kube_vip_enabled: false\n",
                         lambda c: c.spec.kubernetes.control_plane_endpoint, None),
}


def write(tmp_path: Path, inventory: str, all_yml: str) -> Path:
    cfg = tmp_path / "config"
    (cfg / "group_vars").mkdir(parents=True)
    (cfg / "inventory").write_text(inventory)
    (cfg / "group_vars" / "all.yml").write_text(all_yml or "---\n")
    return cfg


def unsupported_wording(lines: list[str]) -> list[str]:
    return [line for line in lines if UNSUPPORTED.search(line)]


def test_every_mapped_variable_has_a_case():
    assert set(CASES) == set(MAPPED)


@pytest.mark.parametrize("var", sorted(CASES))
def test_mapped_variable_gives_its_key(tmp_path, var):
    inventory, all_yml, get, expected = CASES[var]
    result = import_deepops(write(tmp_path, inventory, all_yml))
    assert get(load_text(result.yaml_text)) == expected, result.yaml_text
    assert not [line for line in result.not_carried if f": {var} — " in line], result.not_carried
    assert not unsupported_wording(result.not_carried)


def test_every_listed_variable_is_reported_with_its_reason(tmp_path):
    text = "".join(f"{v}: x\n" for v in LISTED)  # one config with all of them set
    result = import_deepops(write(tmp_path, SMALL, text))
    load_text(result.yaml_text)
    for line_no, var in enumerate(LISTED, 1):
        assert f"group_vars/all.yml:{line_no}: {var} — {reason_for(var)}" in result.notes, var
    assert not unsupported_wording(result.not_carried)


def test_known_variables_are_mapped_or_listed_never_both():
    assert not set(MAPPED) & set(LISTED)
    assert set(KNOWN) == set(MAPPED) | set(LISTED)
    assert len(LISTED) == len(set(LISTED))


def test_no_reason_calls_a_supported_setting_unsupported():
    words = [reason_for(v) for v in KNOWN] + [reason_for(v, "kubernetes") for v in KNOWN]
    words += [reason_for(v) for v in ("nvidia_driver_something_new", "enroot_something_new", "cuda_new",
                                      "slurm_pyxis_new")]
    assert not unsupported_wording(words)


@pytest.mark.parametrize("value,expected", [("", "no driver"), ('"r550"', "bad version")])
def test_driver_without_exact_version_is_listed_with_the_fix(tmp_path, value, expected):
    text = f"nvidia_driver_branch: {value}\n" if value else ""
    text += "nvidia_driver_ubuntu_use_open_kernel_modules: true\n"
    text += 'nvidia_driver_package_version: "latest"\n' if expected == "bad version" else ""
    result = import_deepops(write(tmp_path, SMALL, text))
    assert load_text(result.yaml_text).spec.nvidia.driver is None
    nc = result.not_carried
    assert [line for line in nc if "nvidia_driver_ubuntu_use_open_kernel_modules — carried with the driver once "
            "nvidia.driver.version is set: add nvidia.driver.kernel_modules: open" in line]
    if expected == "bad version":
        assert [line for line in nc if "nvidia_driver_package_version — 'latest' is not an upstream driver" in line]


def test_a_branch_alone_imports_as_the_branch(tmp_path):
    """DeepOps' config.example shape: only nvidia_driver_branch (its default 580). The spec keeps the branch;
    plan resolves it (workflows/driver_branch.py)."""
    text = 'nvidia_driver_branch: "580"\nnvidia_driver_ubuntu_use_open_kernel_modules: true\n'
    result = import_deepops(write(tmp_path, SMALL, text))
    driver = load_text(result.yaml_text).spec.nvidia.driver
    assert (driver.branch, driver.version, driver.kernel_modules, driver.source) == ("580", None, "open",
                                                                                     "distribution")
    assert '    branch: "580"  # resolved at plan time' in result.yaml_text
    assert not [line for line in result.not_carried if "nvidia_driver_branch" in line]


def test_switched_off_components_stay_unset_and_say_why(tmp_path):
    text = ("slurm_cluster_install_nvidia_driver: false\nnvidia_driver_package_version: 550.127.05\n"
            "slurm_cluster_install_cuda: false\ncuda_version: cuda-toolkit-12-4\n"
            "slurm_install_enroot: true\nslurm_install_pyxis: false\nenroot_version: 3.5.0\n")
    result = import_deepops(write(tmp_path, SMALL, text))
    nv = load_text(result.yaml_text).spec.nvidia
    assert (nv.driver, nv.cuda_toolkit, nv.enroot, nv.pyxis) == (None, None, None, None)
    nc = "\n".join(result.not_carried)
    assert "slurm_cluster_install_nvidia_driver — false: DeepOps left the driver alone" in nc
    assert "nvidia_driver_package_version — not carried: slurm_cluster_install_nvidia_driver is false" in nc
    assert "slurm_cluster_install_cuda — false: DeepOps installed no CUDA toolkit" in nc
    assert "slurm_install_pyxis — false: DeepOps installs enroot and pyxis only together" in nc
    assert "enroot_version — not carried: no enroot/pyxis installed" in nc


def test_kubernetes_import_lists_slurm_only_variables(tmp_path):
    inv = "[kube_control_plane]\ncp ansible_host=10.2.0.1\n[kube_node]\nw ansible_host=10.2.0.2\n"
    text = "slurm_install_enroot: true\nenroot_version: 3.5.0\nnvidia_driver_package_version: 550.127.05\n"
    result = import_deepops(write(tmp_path, inv, text))
    nv = load_text(result.yaml_text).spec.nvidia
    assert nv.enroot is None and nv.driver.version == "550.127.05"
    assert [line for line in result.not_carried if "enroot_version — a Slurm setting (it maps to "
            "nvidia.enroot.version); this cluster.yaml is for kubernetes" in line]


def test_per_host_and_per_group_values_of_cluster_settings_are_listed(tmp_path):
    cfg = write(tmp_path, SMALL + "[slurm-node:vars]\ninstall_dcgm=false\n", "")
    (cfg / "host_vars").mkdir()
    (cfg / "host_vars" / "n1.yml").write_text("enroot_version: 3.5.0\n")
    result = import_deepops(cfg)
    assert load_text(result.yaml_text).spec.nvidia.dcgm.enabled
    assert "inventory:11: install_dcgm — set for [slurm-node] only; the import reads nvidia.dcgm.enabled from " \
           "[all] and [slurm-cluster]: move it there or set it in cluster.yaml" in result.not_carried
    assert "host_vars/n1.yml:1: enroot_version (n1) — a per-host value; cluster.yaml sets nvidia.enroot.version " \
           "for the whole cluster: not carried" in result.not_carried


def _fixture_vars(cfg: Path) -> list[tuple[str, str]]:
    """(where, variable) for every variable set in a fixture config (inventory, group_vars, host_vars)."""
    inv = read_config(cfg, "inventory")
    layers = [e.vars for e in inv.groups.values()] + [e.vars for e in inv.hosts.values()]
    layers += list(inv.group_vars.values()) + list(inv.host_vars.values())
    return [(v.where, k) for layer in layers for k, v in layer.items()]


@pytest.mark.parametrize("cfg", CONFIGS, ids=lambda p: p.parent.name)
def test_fixture_variables_are_known_and_never_dropped_silently(cfg):
    result = import_deepops(cfg)
    cluster = load_text(result.yaml_text)
    assert cluster.nodes
    found = _fixture_vars(cfg)
    assert found
    assert sorted({k for _, k in found} - set(KNOWN)) == []  # add new ones to deepops_vars
    for where, var in found:
        listed = [line for line in (i.line() for i in result.report.items) if line.startswith(f"{where}: {var}")
                  or line.startswith(f"{where.rsplit(':', 1)[0]} — settings of [")]
        assert listed or var in MAPPED, (where, var)
    assert not unsupported_wording(result.not_carried)
    assert len(CONFIGS) >= 4
