"""Each component's pyinfra deploy, by direct reference, under the component's name (components/ declares what a
component is; one declared as data has none here: deploy/resources.py applies its resources). deploy_of
(deploy/__init__.py) reads it; tests/unit/test_components.py checks that every declared component has exactly one
way to be applied."""

from __future__ import annotations

from corral.deploy import (acceptance, accounting, adopt, base, containers, easybuild,
                           jobhooks, jupyterhub, kubernetes, kubernetes_cluster, mig,
                           nvidia_driver, nvidia_tools, package_batch, package_source, passwords, proxy,
                           registry, sacct, slurm, slurm_ha, slurm_version, software, sssd, storage,
                           upgrades, users)

DEPLOYS = {
    "base": base.base,
    "proxy": proxy.proxy,
    "package source": package_source.package_source,
    "kubernetes node": kubernetes.kubernetes_node,
    "kubernetes cluster": kubernetes_cluster.kubernetes_cluster,
    "package upgrades": upgrades.package_upgrades,
    "slurm version": slurm_version.slurm_version,
    "sssd": sssd.sssd,
    "storage server": storage.storage_server,
    "storage mounts": storage.storage_mounts,
    "users": users.users,
    "passwords": passwords.passwords,
    "slurm user": slurm_ha.slurm_user,
    "packages": package_batch.package_batch,
    "images registry": registry.registry,
    "jobhooks": jobhooks.jobhooks,
    "nvidia driver": nvidia_driver.nvidia_driver,
    "mig": mig.mig,
    "containers": containers.containers,
    "accounting": accounting.accounting,
    "slurm controller": slurm.slurm_controller,
    "slurm compute": slurm.slurm_compute,
    "pam_slurm_adopt": adopt.adopt,
    "slurm login": slurm.slurm_login,
    "accounting sync": sacct.accounting_sync,
    "nvidia tools": nvidia_tools.nvidia_tools,
    "acceptance tools": acceptance.acceptance,
    "software": software.software,
    "notebook venv": jupyterhub.notebook_venv,
    "jupyterhub": jupyterhub.jupyterhub,
    "easybuild": easybuild.easybuild,
}
