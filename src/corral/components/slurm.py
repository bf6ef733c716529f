"""scheduler: slurm: the components in the order each node runs them (what each waits for on other
nodes: `waits`). proxy comes right after base, before anything reaches a mirror (package upgrades
refreshes apt's lists); slurm user (after SSSD and the local accounts, whose ids it checks) before the
packages: HA controllers' slurm account has a fixed id, the packages would make one; packages installs
the Debian packages of the components after it in one transaction (deploy/package_batch.py)."""

from __future__ import annotations

from corral.components import Component, daemons as d, gates, gives
from corral.components.common import HEAD
from corral.render.acceptance import BUILD_PACKAGES as ACCEPTANCE_BUILD, NCCL_PACKAGES, OPENMPI_PACKAGES
from corral.render.containers import BUILD_PACKAGES as PYXIS_BUILD, FETCH_PACKAGES
from corral.render.jupyterhub import BUILD_PACKAGES as NOTEBOOK_BUILD, HUB_PACKAGES as NOTEBOOK_HUB
from corral.render.lmod import LMOD, MPI_BUILD, MPI_RUN
from corral.render.health import resources as health_resources
from corral.render.munge import resources as munge_resources
from corral.render.podman import resources as podman_resources
from corral.render.apptainer import resources as apptainer_resources
from corral.render.power import resources as power_resources
from corral.render.registry import trust_resources
from corral.render.slurm_exporter import resources as slurm_exporter_resources
from corral.render import dcgm, dcgm_exporter, grafana, monitoring, slurm_rest
from corral.render.registry import PACKAGE as REGISTRY
from corral.render.sssd import PACKAGES as SSSD_PACKAGES
from corral.render.vendor_repos import CTK_PACKAGES
from corral.spec.shared import mounts_of

SLURM_ROLES = ("controller", "compute", "login")
CONTROLLER = ("slurmctld", "slurm-client")
COMPUTE = ("slurmd", "slurm-client")
LOGIN = ("slurm-client", "python3-venv")  # users make their venvs there (job clients)
ACCOUNTING = ("mariadb-server", "slurmdbd")
ADOPT = "libpam-slurm-adopt"
NFS_SERVER = "nfs-kernel-server"


def _role(role: str, names, why: str | None = None):
    def needs(cluster, node) -> dict[str, str]:
        return gives(names, why or f"role {role}") if role in node.roles else {}
    return needs


def _sssd(cluster, node):
    return gives(SSSD_PACKAGES, "identity.ldap") if cluster.spec.identity.ldap is not None else {}


def _nfs_server(cluster, node):
    real = cluster.spec.virtual is None  # a virtual cluster's NAS is a bind mount of the host's directory
    return gives([NFS_SERVER], "storage.exports") if real and "nfs" in node.roles and cluster.spec.storage.exports else {}


def _mount_clients(cluster, node):
    if cluster.spec.virtual is not None:
        return {}
    return gives([p for m in mounts_of(cluster, node) for p in m.client_packages()], "storage.mounts")


def _mig(cluster, node):
    layout = "compute" in node.roles and node.gpus is not None and node.gpus.mig is not None
    return gives(FETCH_PACKAGES, "nvidia.mig_parted downloads") if layout and cluster.spec.virtual is None else {}


def _containers(cluster, node):
    nv, out = cluster.spec.nvidia, {}
    if nv.enroot is not None and "compute" in node.roles:
        out.update(gives(FETCH_PACKAGES, "nvidia.enroot/pyxis downloads"))
    if nv.pyxis is not None and any(r in node.roles for r in SLURM_ROLES):  # built against the installed Slurm
        out.update({**gives(FETCH_PACKAGES, "nvidia.enroot/pyxis downloads"),
                    **gives(PYXIS_BUILD, "nvidia.pyxis (built on the nodes)")})
    return out


def _compute(cluster, node):
    if "compute" not in node.roles:
        return {}
    out = gives(COMPUTE, "role compute")
    t = cluster.spec.topology
    if t is not None and t.discover and not t.ibnetdiscover_file:
        out["infiniband-diags"] = "topology.discover"  # ibnetdiscover (deploy/fabric.py)
    if cluster.spec.virtual is None:  # installed where the node has an active RDMA port
        out["perftest"] = "validate --fabric"
    return out


def _adopt(cluster, node):
    on = cluster.spec.identity.pam_slurm_adopt and "compute" in node.roles and "login" not in node.roles
    return gives([ADOPT], "identity.pam_slurm_adopt") if on else {}


def _gpu_compute(node) -> bool:
    return bool(node.gpu_count) and "compute" in node.roles


def _archive_driver(cluster, node):
    """Debian's own driver (nvidia.driver.source: distribution): the branch's packages, nvidia-persistenced and, on
    real servers, the kernel headers DKMS builds against; installed by the driver's rollout (render/nvidia.py)."""
    from corral.errors import UsageError
    from corral.render.nvidia import driver_packages, unpinned_packages
    from corral.spec.nvidia_archive import HEADERS
    from corral.spec.releases import release
    driver, rel = cluster.spec.nvidia.driver, release(node.os)
    if driver is None or driver.source != "distribution" or rel.distro != "debian" or not _gpu_compute(node):
        return {}
    try:
        names = driver_packages(driver, node, rel.distro, rel.version) + unpinned_packages(driver, rel.distro)
    except UsageError:  # a branch the release's archive lacks: refused by spec check
        return {}
    out = gives(names, "nvidia.driver (Debian's non-free archive)")
    if cluster.spec.virtual is None:
        out[HEADERS] = "nvidia.driver (DKMS builds the module against the kernel's headers)"
    return out


def _archive_toolkit(cluster, node):
    """Debian's CUDA toolkit (nvidia.cuda_toolkit.source: distribution) on compute and login nodes."""
    from corral.spec.nvidia_archive import TOOLKIT
    from corral.spec.releases import release
    cuda, rel = cluster.spec.nvidia.cuda_toolkit, release(node.os)
    if cuda is None or cuda.source != "distribution" or not {"compute", "login"} & set(node.roles):
        return {}
    found = TOOLKIT.get(rel.version) if rel.distro == "debian" else None
    return {found[1]: "nvidia.cuda_toolkit (Debian's non-free archive)"} if found else {}


def _cuda_tools(cluster, node):
    nv, out = cluster.spec.nvidia, {}
    if nv.cuda_toolkit is not None and nv.cuda_toolkit.source == "cuda":
        out["cuda-toolkit-" + nv.cuda_toolkit.version.replace(".", "-")] = "nvidia.cuda_toolkit"
    if nv.container_toolkit is not None:
        out.update(gives(CTK_PACKAGES, "nvidia.container_toolkit"))
    return out


def _acceptance(cluster, node):
    acc = cluster.spec.acceptance
    if cluster.spec.virtual is not None or not _gpu_compute(node) or not (acc.burn.enabled or acc.nccl.enabled):
        return {}
    out = gives(ACCEPTANCE_BUILD, "acceptance (gpu-burn, nccl-tests built on the nodes)")
    if acc.nccl.enabled and acc.nccl.across_nodes:
        out.update(gives(OPENMPI_PACKAGES, "acceptance.nccl.across_nodes"))
    return out


def _nccl(cluster, node):
    return gives(NCCL_PACKAGES, "acceptance.nccl") if cluster.spec.acceptance.nccl.enabled else {}


def _software(cluster, node):
    if not gates.software_user(cluster, node):
        return {}
    out = gives(LMOD, "software (Lmod)")
    if cluster.spec.software.openmpi:
        out.update(gives(MPI_RUN, "software.openmpi (srun --mpi=pmix)"))
        if "login" in node.roles:
            out.update(gives(MPI_BUILD, "software.openmpi (mpicc on login nodes)"))
    return out


def _monitored(cluster) -> bool:
    return cluster.spec.monitoring.enabled and bool(cluster.with_role("monitoring"))


def _slurm_exporter(cluster, node) -> bool:
    """The first controller, with monitoring."""
    controllers = cluster.with_role("controller")
    return _monitored(cluster) and bool(controllers) and node.name == controllers[0].name


def _grafana(cluster, node):
    return gives(["grafana"], "monitoring.grafana") if _monitored(cluster) and "monitoring" in node.roles else {}


def _registry(cluster, node):
    if not gates.registry(cluster, node):
        return {}
    from corral.render import registry_auth as ra
    auth = gives(ra.PACKAGES, "images.registry: the site registry's token server") if ra.enabled(cluster) else {}
    return {**gives([REGISTRY, "curl"], "images.registry (curl: its readiness)"), **auth}


COMPONENTS = (
    *HEAD,
    Component("package upgrades"),
    Component("slurm version"),
    Component("sssd", packages=_sssd, applies=gates.ldap, daemons=d.sssd),  # the directory is outside the cluster
    Component("storage server", packages=_nfs_server, applies=gates.nfs_server,
              daemons=d.nfs_server),
    Component("storage mounts", waits=("storage server",), packages=_mount_clients,
              daemons=d.nfs_client),
    Component("users"),  # homes are made on the node that holds them (spec/shared.home_maker)
    Component("passwords", applies=gates.passwords),  # users[].password, login nodes
    Component("slurm user"),
    Component("packages"),
    Component("munge", resources=munge_resources, stops={"*": ("munge",)}),  # the key: from the control host
    # the CA before the registry: its readiness check trusts it
    Component("ca trust", applies=gates.cluster_ca, resources=trust_resources),
    Component("images registry", packages=_registry, applies=gates.registry,
              daemons=d.registry),
    Component("podman", applies=gates.podman, resources=podman_resources),
    Component("apptainer", applies=gates.apptainer, resources=apptainer_resources),  # its module: "software"
    Component("health", applies=gates.health, resources=health_resources),
    Component("jobhooks", applies=gates.compute),
    Component("nvidia driver", daemons=d.nvidia_driver, packages=_archive_driver),
    Component("mig", packages=_mig, applies=gates.mig, stops={"compute": ("corral-mig",)}),
    Component("containers", packages=_containers),
    Component("accounting", applies=gates.accounting, packages=_role("accounting", ACCOUNTING),
              stops={"accounting": ("slurmdbd",)}, daemons=d.accounting),  # MariaDB and slurmdbd on the same node
    Component("power", applies=gates.power, resources=power_resources),
    # slurm.rest, before the controller's: the JWT key slurmctld reads (slurm.conf names it), the plugin
    Component("slurm jwt", applies=slurm_rest.jwt_on, resources=slurm_rest.jwt_resources,
              slurm_conf=slurm_rest.slurm_conf),
    Component("slurm controller", applies=gates.controller, waits=("accounting",),  # registers with slurmdbd
              packages=_role("controller", CONTROLLER), stops={"controller": ("slurmctld",)},
              daemons=d.slurm_controller),
    # slurmrestd (slurm.rest) once slurm.conf is there
    Component("slurm rest", applies=slurm_rest.rest_on, resources=slurm_rest.rest_resources,
              stops={"controller": (slurm_rest.UNIT,)}),
    # configless slurmd fetches its config from slurmctld
    Component("slurm compute", applies=gates.compute, waits=("slurm controller",), packages=_compute,
              stops={"compute": ("slurmd",)}, daemons=d.slurm_compute),
    # PrologFlags=Contain comes with the controller's slurm.conf
    Component("pam_slurm_adopt", applies=gates.compute, waits=("slurm controller",), packages=_adopt),
    Component("slurm login", applies=gates.login_only, waits=("slurm controller",), packages=_role("login", LOGIN)),
    # sacctmgr through slurmdbd, the cluster registered
    Component("accounting sync", waits=("accounting", "slurm controller")),
    Component("dcgm", resources=dcgm.resources, stops={"compute": (dcgm.SERVICE,)}),
    Component("nvidia tools", vendor=_cuda_tools, packages=_archive_toolkit),
    Component("acceptance tools", packages=_acceptance, vendor=_nccl),
    # modules for what the components before it installed (Open MPI, the CUDA toolkit, the acceptance tools)
    Component("software", packages=_software, applies=gates.software),
    # the venv on the shared software root, then the hub that runs from it (docs/components/notebooks.md)
    Component("notebook venv", applies=gates.notebook_builder,
              packages=lambda c, n: gives(NOTEBOOK_BUILD, "workbench.jupyterhub (builds the venv)")
              if gates.notebook_builder(c, n) else {}),
    Component("jupyterhub", waits=("notebook venv", "slurm controller"),
              applies=gates.jupyterhub, stops={"login": ("corral-jupyterhub",)}, daemons=d.jupyterhub,
              packages=lambda c, n: gives(NOTEBOOK_HUB, "workbench.jupyterhub") if gates.jupyterhub(c, n) else {}),
    # EasyBuild's venv and install tree on the software root, its configuration (docs/components/software.md)
    Component("easybuild", applies=gates.easybuild,
              packages=lambda c, n: gives(NOTEBOOK_BUILD, "software.easybuild (builds the venv)")
              if gates.easybuild_builder(c, n) else {}),
    # Prometheus scrapes targets whenever they answer
    Component("monitoring", applies=monitoring.applies, resources=monitoring.resources,
              stops={"monitoring": (monitoring.PROM, monitoring.AM), "*": (monitoring.NE,)}),
    Component("slurm exporter", waits=("slurm controller",),  # sinfo, squeue
              applies=_slurm_exporter, resources=slurm_exporter_resources,
              stops={"controller": ("corral-slurm-exporter",)}),
    Component("dcgm exporter", applies=dcgm_exporter.applies, resources=dcgm_exporter.resources,
              stops={"compute": (dcgm_exporter.UNIT,)}),
    # its data source is read when a dashboard is opened
    Component("grafana", vendor=_grafana, applies=grafana.applies, resources=grafana.resources,
              stops={"monitoring": ("grafana-server",)}),
)
