"""Where each Slurm component applies, declared once: the node's roles and the spec's switches. A
component's declaration names its gate (`applies`); its deploy does nothing on a node outside it and
`corral render` writes none of its files there (workflows/render_slurm.py reads the declaration).
Skips with a reason (a virtual cluster's NAS, a login node that is a compute node too) stay in the
deploys and renderers, where the plan and the notes say them."""

from __future__ import annotations


def ldap(cluster, node) -> bool:
    return cluster.spec.identity.ldap is not None


def nfs_server(cluster, node) -> bool:
    return "nfs" in node.roles and bool(cluster.spec.storage.exports)


def compute(cluster, node) -> bool:
    return "compute" in node.roles


def health(cluster, node) -> bool:
    return "compute" in node.roles and cluster.spec.health.enabled


def mig(cluster, node) -> bool:
    return "compute" in node.roles and node.gpus is not None and node.gpus.mig is not None


def accounting(cluster, node) -> bool:
    return "accounting" in node.roles


def power(cluster, node) -> bool:
    return "controller" in node.roles and cluster.spec.power.enabled


def controller(cluster, node) -> bool:
    return "controller" in node.roles


def login_only(cluster, node) -> bool:
    """A login node that is not a controller (a controller has slurm.conf already)."""
    return "login" in node.roles and "controller" not in node.roles


def software_user(cluster, node) -> bool:
    """A node users work on with `software:`: Lmod and corral's modules (login and compute nodes)."""
    return cluster.spec.software is not None and ("login" in node.roles or "compute" in node.roles)


def software_maker(cluster, node) -> bool:
    """The node that makes the software root's module tree on shared storage (spec/shared.maker)."""
    from corral.render.lmod import root_tree
    from corral.spec.shared import maker
    if cluster.spec.software is None:
        return False
    made = maker(cluster, root_tree(cluster))
    return made is not None and made[0].name == node.name


def software(cluster, node) -> bool:
    return software_user(cluster, node) or software_maker(cluster, node)


def easybuild(cluster, node) -> bool:
    """software.easybuild: login and compute nodes (its configuration), and the nodes that build its venv and
    make its install tree on the software root (spec/easybuild.py)."""
    from corral import workbench_wheels as ww
    from corral.spec import easybuild as eb
    if cluster.spec.software is None or cluster.spec.software.easybuild is None or eb.build_node(cluster) is None:
        return False
    if software_user(cluster, node):
        return True
    made = [eb.venv_builder(cluster, ww.lock_id(eb.python_of(cluster), ww.EASYBUILD)), eb.tree_maker(cluster)]
    return any(m is not None and m[0].name == node.name for m in made)


def easybuild_builder(cluster, node) -> bool:
    """The node that builds EasyBuild's venv (python3-venv there)."""
    from corral import workbench_wheels as ww
    from corral.spec import easybuild as eb
    if not easybuild(cluster, node):
        return False
    made = eb.venv_builder(cluster, ww.lock_id(eb.python_of(cluster), ww.EASYBUILD))
    return made is not None and made[0].name == node.name


def registry(cluster, node) -> bool:
    """The node images.registry names."""
    r = cluster.spec.images.registry
    return r is not None and r.node == node.name


def cluster_ca(cluster, node) -> bool:
    """Every node, when the cluster's CA (site_ca) signs the registry's or the notebook hub's certificate:
    its trust store holds the CA."""
    r, hub = cluster.spec.images.registry, cluster.spec.workbench.jupyterhub
    return (r is not None and r.tls.cert_file is None) or (hub is not None and hub.tls is None)


def podman(cluster, node) -> bool:
    """Login and compute nodes with images.podman."""
    return cluster.spec.images.podman and ("login" in node.roles or "compute" in node.roles)


def apptainer(cluster, node) -> bool:
    """Login and compute nodes with images.apptainer."""
    return cluster.spec.images.apptainer is not None and ("login" in node.roles or "compute" in node.roles)


def notebook_builder(cluster, node) -> bool:
    """The node that builds the notebook hub's venv on the shared software root (render/jupyterhub.py)."""
    from corral.spec.releases import release
    from corral.spec.workbench import hub_node, venv_builder
    from corral.workbench_wheels import lock_id
    hub = hub_node(cluster)
    if hub is None or cluster.spec.software is None:
        return False
    built = venv_builder(cluster, lock_id(release(hub.os).python))
    return built is not None and built[0].name == node.name


def jupyterhub(cluster, node) -> bool:
    """The node the notebook hub runs on."""
    from corral.spec.workbench import hub_node
    hub = hub_node(cluster)
    return hub is not None and hub.name == node.name


def passwords(cluster, node) -> bool:
    """A login node, where users[].password is set (deploy/passwords.py)."""
    return "login" in node.roles and any(u.password for u in cluster.spec.users)
