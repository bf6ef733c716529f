"""pyinfra deploys, one module per component. Each is a `@deploy` function taking no arguments
that reads its node from `host.data.corral_node` (and the cluster from `host.data.corral_cluster`);
the engine (corral.engine.run) plans or applies them."""


def components(cluster) -> list:
    """The deploys `corral plan/apply` run for this cluster, in order (each skips nodes without
    its role). Each node runs them in this order; what one waits for on other nodes (the controller
    before slurmd, accounting before the controller and the sync) is in deploy/order.py.
    package_batch installs the packages of the deploys after it in one transaction (deploy/package_batch.py)."""
    if cluster.spec.scheduler == "kubernetes":
        return kubernetes_components()
    from corral.deploy.acceptance import acceptance
    from corral.deploy.accounting import accounting
    from corral.deploy.adopt import adopt
    from corral.deploy.base import base
    from corral.deploy.containers import containers
    from corral.deploy.dcgm import dcgm
    from corral.deploy.dcgm_exporter import dcgm_exporter
    from corral.deploy.grafana import grafana
    from corral.deploy.health import health
    from corral.deploy.jobhooks import jobhooks
    from corral.deploy.mig import mig
    from corral.deploy.monitoring import monitoring
    from corral.deploy.munge import munge
    from corral.deploy.nvidia_driver import nvidia_driver
    from corral.deploy.nvidia_tools import nvidia_tools
    from corral.deploy.package_batch import package_batch
    from corral.deploy.package_source import package_source
    from corral.deploy.power import power
    from corral.deploy.proxy import proxy
    from corral.deploy.sacct import accounting_sync
    from corral.deploy.slurm import slurm_compute, slurm_controller, slurm_login
    from corral.deploy.slurm_exporter import slurm_exporter
    from corral.deploy.slurm_ha import slurm_user
    from corral.deploy.slurm_version import slurm_version
    from corral.deploy.sssd import sssd
    from corral.deploy.storage import storage_mounts, storage_server
    from corral.deploy.upgrades import package_upgrades
    from corral.deploy.users import users
    # proxy right after base: before anything reaches a mirror (package_upgrades refreshes apt's lists);
    # slurm_user (after SSSD and the local accounts, whose ids it checks) before the packages: HA controllers'
    # slurm account has a fixed id, the packages would make one
    from corral.deploy.order import mark
    return mark([base, proxy, package_source, package_upgrades, slurm_version, sssd, storage_server, storage_mounts, users, slurm_user, package_batch,
            munge, health, jobhooks, nvidia_driver, mig, containers, accounting, power, slurm_controller, slurm_compute, adopt, slurm_login,
            accounting_sync, dcgm, nvidia_tools, acceptance, monitoring, slurm_exporter, dcgm_exporter, grafana])


def kubernetes_components() -> list:
    """scheduler: kubernetes (docs/components/kubernetes.md): the nodes' base, proxy and package source as
    for Slurm, then each node's Kubernetes prerequisites, tools and kubeadm init (deploy/kubernetes.py),
    then what the first control-plane node applies to the cluster (deploy/kubernetes_cluster.py). Joins
    follow the run (workflows/k8s_join.py)."""
    from corral.deploy.base import base
    from corral.deploy.kubernetes import kubernetes_node
    from corral.deploy.kubernetes_cluster import kubernetes_cluster
    from corral.deploy.package_source import package_source
    from corral.deploy.proxy import proxy
    from corral.deploy.order import mark
    return mark([base, proxy, package_source, kubernetes_node, kubernetes_cluster])
