"""The DeepOps variables `corral import deepops` knows: those it maps (MAPPED: the cluster.yaml key each
sets), those it lists with a reason (LISTED, from DeepOps' config.example, its roles' defaults and
Kubespray's usual settings), and the reasons for the rest (NO_SETTING, by name pattern).

A variable is never dropped silently: a mapped one whose value cannot be carried is listed by the
code that maps it (deepops.py, deepops_nvidia.py) with the key to set instead."""

from __future__ import annotations

import re

from corral.importers.deepops_inventory import GROUP_NOTES, OTHER_GROUPS, Inventory, Var, canon
from corral.spec.schedulers import SCHEDULERS

MAPPED = {  # DeepOps variable -> the cluster.yaml key it sets
    "ansible_host": "nodes[].addresses", "ansible_user": "ssh.user", "ansible_ssh_user": "ssh.user",
    "ansible_port": "ssh.port", "ansible_ssh_port": "ssh.port", "ansible_ssh_private_key_file": "ssh.key",
    "ansible_ssh_common_args": "ssh.jump_host",
    "slurm_cluster_name": "name", "slurm_max_job_timelimit": "slurm.partitions[batch].max_time",
    "slurm_enable_monitoring": "nodes[].roles (monitoring)",
    "slurm_monitoring_group": "nodes[].roles (monitoring)",
    "slurm_autodetect_nvml": "slurm.gres_autodetect",
    "slurm_cluster_install_nvidia_driver": "nvidia.driver (false: unset)",
    "nvidia_driver_package_version": "nvidia.driver.version",
    "nvidia_driver_branch": "nvidia.driver.version (its major number)",
    "nvidia_driver_ubuntu_branch": "nvidia.driver.version (its major number)",
    "nvidia_driver_rhel_branch": "nvidia.driver.version (its major number)",
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
    "kube_vip_address": "kubernetes.control_plane_endpoint.address",
    "kube_vip_interface": "kubernetes.control_plane_endpoint.interface",
    "kube_vip_enabled": "kubernetes.control_plane_endpoint (false: unset)",
}
PER_HOST = frozenset({"ansible_host", "ansible_user", "ansible_ssh_user", "ansible_port", "ansible_ssh_port",
                      "ansible_ssh_private_key_file", "ansible_ssh_common_args"})  # read per host
SLURM_ONLY = frozenset(k for k in MAPPED if k.startswith(("slurm_", "enroot_")))

NOT_YET = "not imported yet: "
REASONS = {  # a specific reason (else NO_SETTING's, by pattern); "!" = say this as it is
    "!" + NOT_YET + "write storage.exports / storage.mounts (and the nfs role) in cluster.yaml from it "
    "(docs/components/storage.md); Kubernetes NFS provisioning is not supported": (
        "nfs_exports", "nfs_mounts", "slurm_enable_nfs_client_nodes", "nfs_client_group", "nfs_idmapd_domain",
        "autofs_mount", "autofs_map", "k8s_nfs_client_provisioner", "k8s_deploy_nfs_server", "k8s_nfs_server",
        "k8s_nfs_export_path", "slurm_enable_nfs_server", "nfs_server_group"),
    "!" + NOT_YET + "write users: / groups: in cluster.yaml (docs/components/users.md); accounts that exist "
    "on the nodes are kept, and adopted when the spec names them with the same uid": ("users",),
    "!corral runs as ssh.user, through `sudo -n` when that is not root": ("ansible_become",),
    "!corral installs nvidia.driver.version and holds it there (never 'latest', never removes it)": (
        "nvidia_driver_package_state",),
    "!corral keeps nvidia-persistenced enabled and running wherever it manages the driver; no switch": (
        "nvidia_driver_persistence_mode_on",),
    "!corral's driver rollout always drains, reboots and verifies each node (nvidia.rollout); no skip": (
        "nvidia_driver_skip_reboot",),
    "!nvidia.driver takes no kernel-module parameters (only version, kernel_modules, source, package, repo_url)": (
        "nvidia_driver_module_file", "nvidia_driver_module_params"),
    "!corral adds NVIDIA's CUDA repository itself when nvidia.driver.source is cuda": ("nvidia_driver_add_repos",),
    "!corral installs the driver on compute nodes with GPUs (declare gpus:); no force switch": (
        "nvidia_driver_force_install",),
    "!corral picks the driver packages from nvidia.driver (source, kernel_modules; docs/components/nvidia.md); "
    "nvidia.driver.package overrides them with one name": (
        "nvidia_driver_ubuntu_packages", "nvidia_driver_ubuntu_packages_suffix"),
    "!corral installs NVIDIA's signing key (cuda-keyring) from nvidia.driver.repo_url": (
        "nvidia_driver_ubuntu_cuda_keyring_url", "nvidia_driver_ubuntu_cuda_keyring_package",
        "nvidia_driver_ubuntu_cuda_repo_gpgkey_id", "old_nvidia_driver_ubuntu_cuda_repo_gpgkey_id",
        "nvidia_driver_rhel_cuda_repo_gpgkey"),
    "!corral installs one CUDA toolkit on all nodes (nvidia.cuda_toolkit.version) and leaves DGX OS nodes' "
    "NVIDIA stack to DGX OS": ("cuda_dgx_1_version", "cuda_dgx_2_version", "cuda_dgx_a100_version"),
    "!MIG is set per node group: declare gpus: and set gpus.mig (unset leaves MIG alone)": (
        "mig_manager_profile", "mig_manager_config", "mig_manager_hooks"),
    "GPU-clock setting": ("gpu_clock_reset", "gpu_clock_lock", "allow_user_set_gpu_clocks"),
    "!cluster.yaml sets only enroot.conf lines (nvidia.enroot.settings); copy environ, hook and mount files "
    "to /etc/enroot yourself": ("enroot_environ_config_files", "enroot_environ_config_files_dgx",
                                "enroot_hook_config_files", "enroot_mount_config_files"),
    "!corral installs nvidia.enroot.version (never removes it)": ("enroot_package_state",),
    "!corral downloads enroot from nvidia.enroot.url, a template with {version}, {package} and {arch}: "
    "write your mirror's URL as that template": ("enroot_deb_packages", "enroot_rpm_packages",
                                                  "enroot_version_string"),
    "!corral installs enroot from nvidia.enroot.url (release packages), not from a package repository": (
        "enroot_ubuntu_repo_key_url", "enroot_ubuntu_repo_key_id", "enroot_ubuntu_repo", "enroot_rhel_repo_gpgkey",
        "enroot_rhel_repo"),
    "kernel-option (namespace) setting for enroot": (
        "enroot_configure_kernel_options", "enroot_configure_kernel_options_versions", "enroot_reboot_timeout",
        "enroot_max_user_namespaces", "enroot_max_mnt_namespaces"),
    "!corral does not resize /run; pyxis' directory is nvidia.pyxis.args.runtime_path": (
        "pyxis_run_tmpfs_size", "resize_run_partition"),
    "!a backup controller needs slurmctld's StateSaveLocation on shared storage, which the import does not write "
    "(DeepOps' NFS mounts are not converted): give the 2nd host of [slurm-master] the controller role once a "
    "storage.mounts entry of both controllers holds slurm.state_save_location (docs/components/slurm.md)": (
        "slurm_enable_ha",),
    "!set slurm.state_save_location to a directory on a storage.mounts entry mounted on both controllers "
    "(DeepOps' NFS mounts are not converted)": ("slurm_ha_state_save_location",),
    "!corral always writes GPU GRES from each node group's gpus: (typed, e.g. gpu:h100:8)": ("slurm_manage_gpus",),
    "pam_slurm_adopt (SSH only to nodes with a job) setting": (
        "slurm_restrict_node_access", "slurm_allow_ssh_user"),
    "!give the node both the compute and the login role in cluster.yaml": ("slurm_login_on_compute",),
    "!corral runs its own health check (corral-health, health:) as HealthCheckProgram, not NHC": (
        "slurm_install_nhc", "slurm_health_check_program", "nhc_config_template"),
    "!corral runs Slurm as the user slurm; no other name or home": (
        "slurm_username", "slurm_db_username", "slurm_user_home"),
    "!corral renders slurm.conf, gres.conf, cgroup.conf and slurmdbd.conf from cluster.yaml (configless); no "
    "custom templates": ("slurm_conf_template", "slurm_cgroup_conf_template", "slurm_gres_conf_template",
                         "slurm_dbd_conf_template", "slurm_conf_symlink"),
    "/etc/hosts setting": ("slurm_configure_etc_hosts", "hosts_add_ansible_managed_hosts_groups"),
    "hostname setting (corral does not rename hosts)": ("deepops_set_hostname",),
    "cloud-init setting": ("deepops_disable_cloud_init",),
    "!DeepOps' own install paths": ("deepops_dir", "deepops_venv"),
    "extra-package or EPEL setting": (
        "software_extra_packages", "software_remove_packages", "epel_package"),
    "DNS-resolver setting": ("dns_config_servers", "dns_config_search", "dns_mode", "dns_late"),
    "rc.local setting": ("rc_local_contents",),
    "!NGC-Ready test images: `corral validate` runs its own GPU jobs": (
        "ngc_ready_cuda_container", "ngc_ready_pytorch", "ngc_ready_tensorflow"),
}
REASON = {name: why for why, names in REASONS.items() for name in names}
LISTED = tuple(REASON) + (  # more known DeepOps variables; NO_SETTING gives their reasons
    "http_proxy", "https_proxy", "no_proxy", "proxy_env", "chrony_install", "chrony_service_state",
    "chrony_service_enabled", "chrony_timezone", "chrony_config_server", "ntp_servers",
    "ssh_client_hardening", "ssh_server_password_login", "ssh_use_pam", "ssh_max_auth_retries", "sftp_enabled",
    "sftp_chroot", "nis_domain", "nis_server", "kerberos_client_realm_name", "kerberos_client_kdc_hostname",
    "kerberos_client_admin_hostname", "docker_install", "docker_version", "docker_dns_servers_strict",
    "docker_storage_options", "docker_options", "docker_iptables_enabled", "docker_login_registries",
    "docker_insecure_registries", "docker_registry_mirrors", "crio_insecure_registries", "container_manager",
    "containerd_snapshotter", "nerdctl_extra_flags", "image_command_tool", "standalone_container_registry_cache_enable",
    "standalone_container_registry_port", "slurm_enable_container_registry", "kube_enable_container_registry",
    "collectd_network_server", "collectd_network_port", "collectd_python_module_path", "collectd_python_modules",
    "collectd_config_dir", "with_dcgm_collectd", "maas_adminusers", "maas_dns_domain", "maas_region_controller",
    "maas_region_controller_url", "maas_repo", "maas_single_node_install", "slurm_version", "slurm_install_prefix",
    "pmix_install_prefix", "hwloc_install_prefix", "slurm_password", "slurm_db_password",
    "slurm_default_job_timelimit", "slurm_install_lmod", "sm_prefix", "sm_module_root", "sm_software_path",
    "sm_files_path",
    "sm_sources_path", "sm_build_path", "sm_files_url", "sm_install_default", "sm_module_path", "sm_install_host",
    "spack_install_dir", "spack_build_packages", "spack_default_packages", "slurm_install_hpcsdk",
    "hpcsdk_major_version", "hpcsdk_minor_version", "hpcsdk_file_cuda", "hpcsdk_arch", "hpcsdk_install_as_modules",
    "hpcsdk_install_in_path", "slurm_cluster_install_openmpi", "openmpi_version", "openmpi_install_prefix",
    "openmpi_configure", "slurm_enable_rsyslog_server", "slurm_enable_rsyslog_client", "rsyslog_server_hostname",
    "rsyslog_client_tcp_host", "rsyslog_client_group", "kube_enable_rsyslog_server", "kube_enable_rsyslog_client",
    "kubeadm_enabled", "kube_api_anonymous_auth", "kube_kubeadm_apiserver_extra_args",
    "kubectl_localhost", "kubeconfig_localhost", "helm_enabled", "tiller_node_selectors", "artifacts_dir",
    "kubelet_flexvolumes_plugins_dir", "deepops_gpu_operator_enabled",
    "dashboard_enabled", "dashboard_image_tag", "dashboard_image_repo", "dashboard_metrics_scrape_tagr",
    "dashboard_metrics_scraper_repo", "grafana_admin_password")
KNOWN = {**dict.fromkeys(LISTED, ""), **MAPPED}  # every DeepOps variable the import knows by name

NO_SETTING = [  # DeepOps variable (regex) -> the cluster.yaml setting it lacks ("!" = say this); first wins
    (r"^\(the whole file\)$", "!Ansible Vault-encrypted; the importer cannot read it"),
    (r"password$|_secret|_token", "!secrets are not copied into cluster.yaml"),
    (r"^(chrony_config_server|ntp_servers)$", "!corral's time-sync component takes no server list yet"),
    (r"^slurm_default_job_timelimit$", "!corral partitions have max_time only, no default time"),
    (r"^(chrony|ntp)_", "time-sync setting"),
    (r"^(https?_proxy|no_proxy|proxy_env)$", "proxy setting (set it on the nodes yourself)"),
    (r"^(nfs_|slurm_enable_nfs|k8s_(deploy_)?nfs|autofs_)", "!" + NOT_YET + "write storage.exports / storage.mounts in cluster.yaml "
     "(docs/components/storage.md)"),
    (r"^(grafana|prometheus|alertmanager|collectd)_|_exporter", "monitoring setting besides the role"),
    (r"^(slurm_version|slurm_install_prefix|slurm_build|slurm_configure(_nvml)?$|slurm_src|pmix_|hwloc_)",
     "Slurm version or build setting"),
    (r"^(nvidia_|cuda_|gpu_clock)", "!not an NVIDIA variable the importer knows; cluster.yaml's nvidia: has driver, "
     "dcgm, cuda_toolkit, container_toolkit, enroot and pyxis (docs/components/nvidia.md)"),
    (r"^(docker_|crio_|containerd_|container_manager|nerdctl_|standalone_container_registry|"
     r"slurm_enable_container_registry)", "container-runtime or registry setting"),
    (r"^(enroot_|pyxis_|slurm_pyxis)", "!not an enroot/pyxis variable the importer knows; see nvidia.enroot and "
     "nvidia.pyxis (docs/components/containers.md)"),
    (r"^(sm_|spack_|hpcsdk_|openmpi_|slurm_install_(lmod|hpcsdk)|slurm_cluster_install_openmpi)",
     "software-module setting (Lmod, Spack, EasyBuild, HPC SDK, OpenMPI)"),
    (r"^(users$|ssh_|sftp_|nis_|kerberos_)", "user-account, SSH-hardening or authentication setting"),
    (r"^(rsyslog_|slurm_enable_rsyslog|kube_enable_rsyslog)", "central-logging setting"),
    (r"^(nhc_|slurm_install_nhc|slurm_health_check)", "health-check-program setting"),
    (r"^maas_", "machine-provisioning setting (MAAS)"),
    (r"^slurm_", "such Slurm setting"),
    (r"^(kube|k8s|helm|dashboard|kubeflow|metallb)|gpu_operator", "such Kubernetes setting"),
]


def reason_for(var: str, scheduler: str = "slurm") -> str:
    if var in MAPPED and var in SLURM_ONLY and not _slurm_conf(scheduler):
        return f"a Slurm setting (it maps to {MAPPED[var]}); this cluster.yaml is for {scheduler}"
    what = REASON.get(var) or next((w for p, w in NO_SETTING if re.search(p, var)), "!no cluster.yaml equivalent")
    return what[1:] if what.startswith("!") else f"cluster.yaml has no {what}"


def truthy(var: Var | None, default: bool = True) -> bool:
    return default if var is None else str(var.value).strip().lower() in ("true", "yes", "on", "1", "y")


def note_rest(inv: Inventory, used: set[str], other: tuple[str, ...], umbrella: str,
              origin: dict[str, str], scheduler: str) -> list[str]:
    """One line per group or variable the import did not use: its place, its name and why."""
    notes, everywhere = [], sum(OTHER_GROUPS.values(), ("all", "ungrouped"))
    for gname, g in inv.groups.items():
        c = canon(gname)
        if c in GROUP_NOTES and c not in other and inv.has_members(gname):
            notes.append(f"{g.where}: [{gname}] — {GROUP_NOTES[c]}")
        elif c not in everywhere and inv.has_members(gname):
            notes.append(f"{g.where}: [{gname}] — not a DeepOps role group; no cluster.yaml role")
    for gname in dict.fromkeys(list(inv.groups) + list(inv.group_vars)):
        scope = gname == "all" or canon(gname) == umbrella  # where the cluster-wide settings were read
        for layer in filter(None, (inv.groups[gname].vars if gname in inv.groups else {},
                                   inv.group_vars.get(gname, {}))):
            why = "a group of the other scheduler" if canon(gname) in other else \
                None if gname in inv.groups else "a group not in the inventory"
            if why:
                files = ", ".join(sorted({v.where.rsplit(":", 1)[0] for v in layer.values()}))
                notes.append(f"{files} — settings of [{gname}], {why}")
                continue
            for k, v in layer.items():
                if k in used and (scope or k in PER_HOST):
                    continue
                notes.append(f"{v.where}: {k} — " + (
                    f"set for [{gname}] only; the import reads {MAPPED[k]} from [all] and [{umbrella}]: move "
                    "it there or set it in cluster.yaml" if _cluster_wide(k, scheduler) and not scope
                    else reason_for(k, scheduler)))
    for name, host in origin.items():
        for layer in (inv.hosts[host].vars, inv.host_vars.get(host, {})):
            for k, v in layer.items():
                if k in used and k in PER_HOST:
                    continue
                notes.append(f"{v.where}: {k} ({name}) — " + (
                    f"a per-host value; cluster.yaml sets {MAPPED[k]} for the whole cluster: not carried"
                    if _cluster_wide(k, scheduler) else reason_for(k, scheduler)))
    return notes


def _cluster_wide(var: str, scheduler: str) -> bool:  # a mapped variable the import reads once per cluster
    return var in MAPPED and var not in PER_HOST and (_slurm_conf(scheduler) or var not in SLURM_ONLY)


def _slurm_conf(scheduler: str) -> bool:
    """Whether the cluster.yaml written carries Slurm's settings (DeepOps' Slurm-only variables)."""
    return "slurm-conf" in SCHEDULERS[scheduler].carries
