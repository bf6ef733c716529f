"""The DeepOps variables `corral import deepops` knows, as one table: those it maps (MAPPED: the
cluster.yaml key each sets), those corral always does itself (BUILT_IN: reported as mapped, or as changed
on purpose where DeepOps had them off), and those it lists with a reason (deepops_reasons.py: REASONS;
NO_SETTING for a variable it does not know, by name pattern). docs/migrating-from-deepops.md's table is
printed from here (importers/deepops_doc.py).

A variable is never dropped silently: a mapped one whose value cannot be carried is listed by the code
that maps it, with the key to set instead."""

from __future__ import annotations

import re

from corral.importers.deepops_inventory import Var
from corral.importers.deepops_reasons import CHRONY, NO_SETTING, REASONS
from corral.spec.schedulers import SCHEDULERS

MAPPED = {  # DeepOps variable -> the cluster.yaml key it sets
    "ansible_host": "nodes[].addresses", "ansible_user": "ssh.user", "ansible_ssh_user": "ssh.user",
    "ansible_port": "ssh.port", "ansible_ssh_port": "ssh.port", "ansible_ssh_private_key_file": "ssh.key",
    "ansible_ssh_common_args": "ssh.jump_host",
    "http_proxy": "proxy.http", "https_proxy": "proxy.https", "no_proxy": "proxy.no_proxy",
    "users": "users", "groups_to_create": "groups",
    "slurm_cluster_name": "name", "slurm_max_job_timelimit": "slurm.partitions[batch].max_time",
    "slurm_default_job_timelimit": "slurm.partitions[batch].extra.DefaultTime",
    "slurm_version": "slurm.version (its major release)",
    "slurm_enable_monitoring": "nodes[].roles (monitoring)",
    "slurm_monitoring_group": "nodes[].roles (monitoring)",
    "slurm_autodetect_nvml": "slurm.gres_autodetect",
    "slurm_restrict_node_access": "identity.pam_slurm_adopt",
    "slurm_allow_ssh_user": "identity.adopt_exempt_users",
    "slurm_enable_nfs_server": "nodes[].roles (nfs)", "nfs_server_group": "nodes[].roles (nfs)",
    "nfs_exports": "storage.exports", "nfs_mounts": "storage.mounts",
    "slurm_enable_nfs_client_nodes": "storage.mounts[].nodes", "nfs_client_group": "storage.mounts[].nodes",
    "slurm_enable_ha": "nodes[].roles (controller, on the 2nd slurm-master)",
    "slurm_ha_state_save_location": "slurm.state_save_location",
    "slurm_cluster_install_nvidia_driver": "nvidia.driver (false: unset)",
    "nvidia_driver_package_version": "nvidia.driver.version",
    "nvidia_driver_branch": "nvidia.driver.branch",
    "nvidia_driver_ubuntu_branch": "nvidia.driver.branch",
    "nvidia_driver_rhel_branch": "nvidia.driver.branch",
    "nvidia_driver_ubuntu_use_open_kernel_modules": "nvidia.driver.kernel_modules",
    "nvidia_driver_ubuntu_install_from_cuda_repo": "nvidia.driver.source",
    "nvidia_driver_ubuntu_cuda_package": "nvidia.driver.package",
    "nvidia_driver_ubuntu_cuda_repo_baseurl": "nvidia.driver.repo_url",
    "nvidia_driver_rhel_cuda_repo_baseurl": "nvidia.driver.repo_url",
    "install_dcgm": "nvidia.dcgm.enabled",
    "slurm_cluster_install_cuda": "nvidia.cuda_toolkit (false: unset)", "cuda_version": "nvidia.cuda_toolkit.version",
    "slurm_install_enroot": "nvidia.enroot", "slurm_install_pyxis": "nvidia.pyxis",
    "enroot_version": "nvidia.enroot.version", "enroot_release": "nvidia.enroot.url",
    "enroot_packages": "nvidia.enroot.packages", "enroot_runtime_path": "nvidia.enroot.runtime_path",
    "enroot_cache_path": "nvidia.enroot.cache_path", "enroot_data_path": "nvidia.enroot.data_path",
    "enroot_config": "nvidia.enroot.settings",
    "slurm_pyxis_version": "nvidia.pyxis.version", "slurm_pyxis_tarball_url": "nvidia.pyxis.url",
    "kube_version": "kubernetes.version", "kube_pods_subnet": "kubernetes.pod_cidr",
    "kube_service_addresses": "kubernetes.service_cidr", "kube_network_plugin": "kubernetes.cni.plugin",
    "k8s_gpu_mig_strategy": "kubernetes.gpu_operator.mig_strategy",
    "gpu_operator_preinstalled_nvidia_software": "kubernetes.gpu_operator.driver.source (true: preinstalled)",
    "gpu_operator_driver_version": "nvidia.driver.version (the Operator's driver container)",
    "kube_vip_address": "kubernetes.control_plane_endpoint.address",
    "kube_vip_interface": "kubernetes.control_plane_endpoint.interface",
    "kube_vip_enabled": "kubernetes.control_plane_endpoint (false: unset)",
}
PER_HOST = frozenset({"ansible_host", "ansible_user", "ansible_ssh_user", "ansible_port", "ansible_ssh_port",
                      "ansible_ssh_private_key_file", "ansible_ssh_common_args"})  # read per host
NFS_VARS = ("slurm_enable_nfs_server", "nfs_server_group", "nfs_exports", "nfs_mounts", "slurm_enable_nfs_client_nodes",
            "nfs_client_group")
SLURM_ONLY = frozenset(k for k in MAPPED if k.startswith(("slurm_", "enroot_"))) | frozenset(NFS_VARS)
K8S_ONLY = frozenset({"gpu_operator_driver_version"})
BUILT_IN = {  # DeepOps switch -> (what corral always does, the side it belongs to (side()); None: both)
    "chrony_install": (CHRONY, None), "chrony_service_state": (CHRONY, None), "chrony_service_enabled": (CHRONY, None),
    "slurm_configure_etc_hosts": ("corral writes every node's /etc/hosts entries from the spec (the base component); "
                                  "no switch", "Slurm"),
    "slurm_manage_gpus": ("corral always writes GPU GRES from each node group's gpus: (typed, e.g. gpu:h100:8)",
                          "Slurm"),
    "deepops_gpu_operator_enabled": ("corral always installs NVIDIA's GPU Operator (kubernetes.gpu_operator)",
                                     "Kubernetes"),
    "kubeadm_enabled": ("corral builds the cluster with kubeadm", "Kubernetes"),
    "helm_enabled": ("corral installs Helm and its charts itself (the CNI, kube-prometheus-stack, the GPU Operator)",
                     "Kubernetes"),
}
REASON = {name: why for why, names in REASONS.items() for name in names}
REASON |= {name: why for name, (why, _) in BUILT_IN.items()}
LISTED = tuple(REASON)  # every known DeepOps variable the import does not map
KNOWN = {**dict.fromkeys(LISTED, ""), **MAPPED}  # every DeepOps variable the import knows by name


def reason(var: str) -> object:
    """The reason object for a variable the import does not map: a str, or a Missing claim."""
    return REASON.get(var) or next((w for p, w in NO_SETTING if re.search(p, var)), "no cluster.yaml equivalent")


def reason_for(var: str, scheduler: str = "slurm") -> str:
    if var in MAPPED and not applies(var, scheduler):
        return f"a {'Slurm' if var in SLURM_ONLY else 'Kubernetes'} setting (it maps to {MAPPED[var]}); this " \
               f"cluster.yaml is for {scheduler}"
    if var in BUILT_IN and not applies(var, scheduler):
        return f"a {BUILT_IN[var][1]} setting ({BUILT_IN[var][0]}); this cluster.yaml is for {scheduler}"
    return str(reason(var))


def side(scheduler: str) -> str:
    """Which of DeepOps' two halves a cluster.yaml of this scheduler takes: Slurm (it carries Slurm's
    settings) or Kubernetes."""
    return "Slurm" if "slurm-conf" in SCHEDULERS[scheduler].carries else "Kubernetes"


def applies(var: str, scheduler: str) -> bool:
    """Whether a mapped or built-in variable means something for a cluster.yaml of this scheduler."""
    half = side(scheduler)
    if var in BUILT_IN:
        return BUILT_IN[var][1] in (None, half)
    return not (var in SLURM_ONLY and half != "Slurm") and not (var in K8S_ONLY and half != "Kubernetes")


def truthy(var: Var | None, default: bool = True) -> bool:
    return default if var is None else str(var.value).strip().lower() in ("true", "yes", "on", "1", "y")
