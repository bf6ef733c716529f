"""Why `corral import deepops` does not carry a DeepOps variable: REASONS for the variables it knows (from
DeepOps' config.example, its roles' defaults and Kubespray's usual settings) and NO_SETTING for the rest, by
name pattern. deepops_vars.py holds the variables it maps or has built in.

A reason is said as it is (a str), or claims that cluster.yaml lacks a setting (a Missing): the claim
names the words (regexes over the JSON Schema's dotted property paths, e.g. `kubernetes.gpu_operator.version`)
such a setting would have, and tests/unit/test_deepops_table.py fails when the schema has one."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Missing:
    """A reason claiming cluster.yaml has no such setting; `absent`: regexes no schema property path
    (e.g. `kubernetes.gpu_operator.version`) may match while the claim is true."""

    what: str
    absent: tuple[str, ...]

    def __str__(self) -> str:
        return f"cluster.yaml has no {self.what}"


CHRONY = "corral runs chrony on every real server (the base component; a virtual node keeps its host's clock); no switch"
SECRET = "secrets are not copied into cluster.yaml"
STORAGE = "(shared filesystems are systemd mount units: storage.mounts)"
NO_BUILD = ("corral installs Slurm from the distribution's packages (slurm.version pins the release); it builds "
            "no Slurm, PMIx or hwloc: no prefix or build setting")
REGISTRY = ("DeepOps' container-registry and mirror settings configure Docker's daemon; corral's registry and "
            "pull-through caches are images.registry, pulled through by podman (docs/components/images.md): write "
            "images: by hand")
MODULES = Missing("Spack or HPC SDK setting: build them on the shared software root (software.root; its export "
                  "and mounts are carried) yourself, its modulefiles/ tree is on every user's MODULEPATH; EasyBuild "
                  "is software.easybuild, set by hand (DeepOps' sm_* paths are not carried)",
                  (r"spack", r"hpc_?sdk"))
LMOD = ("software: gives Lmod and Debian's Open MPI with Slurm's PMIx (software.openmpi) on login and compute "
        "nodes, MODULEPATH with software.root's modulefiles (DeepOps' sm_prefix, /sw) and software.site_trees; "
        "no Open MPI build, prefix or version (docs/components/software.md)")
SSHD = Missing("sshd-hardening setting (corral's sshd drop-in only adds the users' key files)",
               (r"sshd", r"sftp", r"password_login", r"hardening", r"auth_retries"))
NIS = Missing("NIS or Kerberos setting (identity.ldap reads users and groups from LDAP through SSSD)",
              (r"(^|[._])nis([._]|$)", r"kerberos", r"krb"))
SYSLOG = Missing("central-logging (rsyslog) setting", (r"syslog", r"log_server"))
MAAS = Missing("machine-provisioning (MAAS) setting", (r"maas", r"pxe", r"provision"))
DOCKER = ("corral installs no Docker: Slurm jobs run containers with enroot and pyxis (nvidia.enroot, nvidia.pyxis); "
          "nvidia.container_toolkit.engine configures an engine you install")
DASHBOARD = Missing("Kubernetes Dashboard setting (corral installs no Dashboard)", (r"^kubernetes\..*dashboard",))
K8S_NFS = Missing("Kubernetes NFS-provisioner or storage-class setting",
                  (r"^kubernetes\..*(nfs|provisioner|storage)",))
REASONS: dict[object, tuple[str, ...]] = {  # a reason: said as it is (str), or a claim of no setting (Missing)
    "DeepOps' copy of http_proxy, https_proxy and no_proxy for its own tasks; corral's proxy: comes from those "
    "three": ("proxy_env",),
    Missing("timezone setting", (r"timezone", r"(^|[._])tz([._]|$)")): ("chrony_timezone",),
    "corral's time-sync component takes no server list yet (chrony uses the distribution's default pool)": (
        "chrony_config_server", "ntp_servers"),
    Missing("NFSv4 idmapd-domain setting", (r"idmap",)): ("nfs_idmapd_domain",),
    Missing("autofs setting " + STORAGE, (r"autofs", r"automount")): ("autofs_mount", "autofs_map"),
    K8S_NFS: ("k8s_nfs_client_provisioner", "k8s_deploy_nfs_server", "k8s_nfs_server", "k8s_nfs_export_path",
              "k8s_nfs_mkdir"),
    "corral runs as ssh.user, through `sudo -n` when that is not root": ("ansible_become",),
    "corral installs nvidia.driver.version and holds it there (never 'latest', never removes it)": (
        "nvidia_driver_package_state",),
    "corral keeps nvidia-persistenced enabled and running wherever it manages the driver; no switch": (
        "nvidia_driver_persistence_mode_on",),
    "corral's driver rollout always drains, reboots and verifies each node (rollout:); no skip": (
        "nvidia_driver_skip_reboot",),
    "nvidia.driver takes no kernel-module parameters (only version, kernel_modules, source, package, repo_url)": (
        "nvidia_driver_module_file", "nvidia_driver_module_params"),
    "corral adds NVIDIA's CUDA repository itself when nvidia.driver.source is cuda": ("nvidia_driver_add_repos",),
    "corral installs the driver on compute nodes with GPUs (declare gpus:); no force switch": (
        "nvidia_driver_force_install",),
    "corral picks the driver packages from nvidia.driver (source, kernel_modules; docs/components/nvidia.md); "
    "nvidia.driver.package overrides them with one name": (
        "nvidia_driver_ubuntu_packages", "nvidia_driver_ubuntu_packages_suffix"),
    "corral installs NVIDIA's signing key (cuda-keyring) from nvidia.driver.repo_url": (
        "nvidia_driver_ubuntu_cuda_keyring_url", "nvidia_driver_ubuntu_cuda_keyring_package",
        "nvidia_driver_ubuntu_cuda_repo_gpgkey_id", "old_nvidia_driver_ubuntu_cuda_repo_gpgkey_id",
        "nvidia_driver_rhel_cuda_repo_gpgkey"),
    "corral installs one CUDA toolkit on all nodes (nvidia.cuda_toolkit.version) and leaves DGX OS nodes' "
    "NVIDIA stack to DGX OS": ("cuda_dgx_1_version", "cuda_dgx_2_version", "cuda_dgx_a100_version"),
    "MIG is set per node group: declare gpus: and set gpus.mig (unset leaves MIG alone)": (
        "mig_manager_profile", "mig_manager_config", "mig_manager_hooks"),
    Missing("GPU-clock setting", (r"gpu_?clock", r"clocks")): ("gpu_clock_reset", "gpu_clock_lock",
                                                              "allow_user_set_gpu_clocks"),
    "cluster.yaml sets only enroot.conf lines (nvidia.enroot.settings); copy environ, hook and mount files "
    "to /etc/enroot yourself": ("enroot_environ_config_files", "enroot_environ_config_files_dgx",
                                "enroot_hook_config_files", "enroot_mount_config_files"),
    "corral installs nvidia.enroot.version (never removes it)": ("enroot_package_state",),
    "corral downloads enroot from nvidia.enroot.url, a template with {version}, {package} and {arch}: "
    "write your mirror's URL as that template": ("enroot_deb_packages", "enroot_rpm_packages",
                                                  "enroot_version_string"),
    "corral installs enroot from nvidia.enroot.url (release packages), not from a package repository": (
        "enroot_ubuntu_repo_key_url", "enroot_ubuntu_repo_key_id", "enroot_ubuntu_repo", "enroot_rhel_repo_gpgkey",
        "enroot_rhel_repo"),
    Missing("kernel-option (user namespace) setting for enroot", (r"namespace", r"sysctl", r"kernel_option")): (
        "enroot_configure_kernel_options", "enroot_configure_kernel_options_versions", "enroot_reboot_timeout",
        "enroot_max_user_namespaces", "enroot_max_mnt_namespaces"),
    "corral does not resize /run; pyxis' directory is nvidia.pyxis.args.runtime_path": (
        "pyxis_run_tmpfs_size", "resize_run_partition"),
    "give the node both the compute and the login role in cluster.yaml": ("slurm_login_on_compute",),
    "corral runs its own health check (corral-health, health:) as HealthCheckProgram, not NHC": (
        "slurm_install_nhc", "slurm_health_check_program", "nhc_config_template"),
    "corral runs Slurm as the user slurm; no other name or home": (
        "slurm_username", "slurm_db_username", "slurm_user_home"),
    "corral's slurm user has uid and gid 64030 (Debian's), the same on every node: change DeepOps' (22078 by "
    "default) before the first apply (docs/migrating-from-deepops.md)": ("slurm_user_uid",),
    "corral renders slurm.conf, gres.conf, cgroup.conf and slurmdbd.conf from cluster.yaml (configless); no "
    "custom templates": ("slurm_conf_template", "slurm_cgroup_conf_template", "slurm_gres_conf_template",
                         "slurm_dbd_conf_template", "slurm_conf_symlink"),
    "corral renders OverSubscribe=NO on every partition (DeepOps' default); no other value": ("slurm_oversubscribe",),
    SECRET + ": corral generates its own munge key in its state dir (secrets.py)": ("slurm_password",),
    SECRET + ": corral generates its own accounting-database password in its state dir (secrets.py)": (
        "slurm_db_password",),
    NO_BUILD: ("slurm_install_prefix", "pmix_install_prefix", "hwloc_install_prefix"),
    "corral writes /etc/hosts entries for every node of the spec": ("hosts_add_ansible_managed_hosts_groups",),
    Missing("hostname setting (corral does not rename hosts)", (r"hostname",)): ("deepops_set_hostname",),
    Missing("cloud-init setting", (r"cloud_?init",)): ("deepops_disable_cloud_init",),
    "DeepOps' own install paths": ("deepops_dir", "deepops_venv"),
    Missing("extra-package or EPEL setting (packages: sets sources, upgrades and holds)",
            (r"extra_packages", r"epel", r"^packages\.(install|remove)")): (
        "software_extra_packages", "software_remove_packages", "epel_package", "epel_key_url"),
    Missing("DNS-resolver setting", (r"dns", r"resolv", r"nameserver")): (
        "dns_config_servers", "dns_config_search", "dns_mode", "dns_late"),
    Missing("rc.local setting", (r"rc_local",)): ("rc_local_contents",),
    "NGC-Ready test images: `corral validate` runs its own GPU jobs": (
        "ngc_ready_cuda_container", "ngc_ready_pytorch", "ngc_ready_tensorflow"),
    SSHD: ("ssh_client_hardening", "ssh_server_password_login", "ssh_use_pam", "ssh_max_auth_retries", "sftp_enabled",
           "sftp_chroot"),
    NIS: ("nis_domain", "nis_server", "kerberos_client_realm_name", "kerberos_client_kdc_hostname",
          "kerberos_client_admin_hostname"),
    DOCKER: ("docker_install", "docker_version", "docker_dns_servers_strict", "docker_storage_options", "docker_options",
             "docker_iptables_enabled"),
    REGISTRY: ("docker_login_registries", "docker_insecure_registries", "docker_registry_mirrors",
               "crio_insecure_registries", "standalone_container_registry_cache_enable",
               "standalone_container_registry_port", "slurm_enable_container_registry", "kube_enable_container_registry"),
    "corral's Kubernetes runs containerd with its own configuration (render/kubernetes.py); no other runtime or "
    "options": ("container_manager", "containerd_snapshotter", "nerdctl_extra_flags", "image_command_tool"),
    Missing("collectd setting (corral monitors with Prometheus exporters: monitoring:)", (r"collectd",)): (
        "collectd_network_server", "collectd_network_port", "collectd_python_module_path", "collectd_python_modules",
        "collectd_config_dir", "with_dcgm_collectd"),
    MAAS: ("maas_adminusers", "maas_dns_domain", "maas_region_controller", "maas_region_controller_url", "maas_repo",
           "maas_single_node_install"),
    MODULES: ("sm_software_path", "sm_files_path",
              "sm_sources_path", "sm_build_path", "sm_files_url", "sm_install_default",
              "sm_install_host", "spack_install_dir", "spack_build_packages", "spack_default_packages",
              "slurm_install_hpcsdk", "hpcsdk_major_version", "hpcsdk_minor_version", "hpcsdk_file_cuda", "hpcsdk_arch",
              "hpcsdk_install_as_modules", "hpcsdk_install_in_path"),
    LMOD: ("slurm_install_lmod", "sm_prefix", "sm_module_root", "sm_module_path", "slurm_cluster_install_openmpi",
           "openmpi_version", "openmpi_install_prefix", "openmpi_configure"),
    SYSLOG: ("slurm_enable_rsyslog_server", "slurm_enable_rsyslog_client", "rsyslog_server_hostname",
             "rsyslog_client_tcp_host", "rsyslog_client_group", "kube_enable_rsyslog_server",
             "kube_enable_rsyslog_client"),
    Missing("API-server flag setting", (r"apiserver", r"anonymous", r"extra_args")): (
        "kube_api_anonymous_auth", "kube_kubeadm_apiserver_extra_args"),
    Missing("setting that copies the admin kubeconfig or kubectl to the control host", (r"kubeconfig", r"kubectl")): (
        "kubectl_localhost", "kubeconfig_localhost"),
    "Helm 2's Tiller: corral uses Helm 3, which has none": ("tiller_node_selectors",),
    "Kubespray's directory for kubeconfig and kubectl copies on the Ansible host; corral writes none": (
        "artifacts_dir",),
    Missing("kubelet setting", (r"kubelet", r"flexvolume")): ("kubelet_flexvolumes_plugins_dir",),
    DASHBOARD: ("dashboard_enabled", "dashboard_image_tag", "dashboard_image_repo", "dashboard_metrics_scrape_tagr",
                "dashboard_metrics_scraper_repo"),
    SECRET + ": Grafana's admin password is generated in corral's state dir": ("grafana_admin_password",),
}

NO_SETTING: list[tuple[str, object]] = [  # a variable the import does not know (regex) -> its reason; first wins
    (r"^\(the whole file\)$", "Ansible Vault-encrypted; the importer cannot read it"),
    (r"password$|_secret|_token", SECRET),
    (r"^(chrony|ntp)_", "not a time-sync variable the importer knows; " + CHRONY),
    (r"^(nfs_|slurm_enable_nfs|autofs_)", "not an NFS variable the importer knows; see storage.exports and "
     "storage.mounts (docs/components/storage.md)"),
    (r"^k8s_(deploy_)?nfs", K8S_NFS),
    (r"^(grafana|prometheus|alertmanager)_|_exporter", "not a monitoring variable the importer knows; monitoring: "
     "sets Prometheus, Alertmanager, Grafana and the exporters (docs/components/monitoring.md)"),
    (r"^collectd_", Missing("collectd setting", (r"collectd",))),
    (r"^(slurm_install_prefix|slurm_build|slurm_configure(_nvml)?$|slurm_src|pmix_|hwloc_)", NO_BUILD),
    (r"^(nvidia_|cuda_|gpu_clock)", "not an NVIDIA variable the importer knows; cluster.yaml's nvidia: has driver, "
     "dcgm, cuda_toolkit, container_toolkit, enroot and pyxis (docs/components/nvidia.md)"),
    (r"registr", REGISTRY),
    (r"^docker_", DOCKER),
    (r"^(enroot_|pyxis_|slurm_pyxis)", "not an enroot/pyxis variable the importer knows; see nvidia.enroot and "
     "nvidia.pyxis (docs/components/containers.md)"),
    (r"^(openmpi_|slurm_install_lmod|slurm_cluster_install_openmpi|sm_module)", LMOD),
    (r"^(sm_|spack_|hpcsdk_|slurm_install_hpcsdk)", MODULES),
    (r"^(ssh_|sftp_)", SSHD),
    (r"^(nis_|kerberos_)", NIS),
    (r"^(rsyslog_|slurm_enable_rsyslog|kube_enable_rsyslog)", SYSLOG),
    (r"^(nhc_|slurm_install_nhc|slurm_health_check)", "corral runs its own health check (corral-health, health:) as "
     "HealthCheckProgram, not NHC"),
    (r"^maas_", MAAS),
    (r"^slurm_", "not a Slurm variable the importer knows; slurm.extra and slurm.partitions[].extra take the "
     "slurm.conf parameters corral does not render (docs/spec.md)"),
    (r"^dashboard_", DASHBOARD),
    (r"^(kube|k8s|helm|kubeflow|metallb)|gpu_operator", "not a Kubernetes variable the importer knows; see "
     "kubernetes: (docs/components/kubernetes.md)"),
]
