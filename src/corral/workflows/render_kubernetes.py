"""`corral render` for `scheduler: kubernetes` (workflows/render_files.py writes what this returns): per node, every
file the spec's declared components install there, walked as workflows/render_slurm.py walks Slurm's (the components
both schedulers share, base, proxy and the bundle's apt source, from the same renderers): the Kubernetes node's
(kernel modules, sysctls, containerd, the Kubernetes apt source and pin, kubeadm's configuration, kube-vip, the join
script: render/kubernetes.py node_files, deploy/kubernetes.py) and, on the first control-plane node, the Helm
releases' (render/k8s_releases.py control_plane_files, deploy/kubernetes_cluster.py); and the cluster-level objects
(render/gpu_operator.py) under cluster/."""

from __future__ import annotations

from collections.abc import Callable

from corral.deploy.installs import BLOCK
from corral.spec.cluster import Cluster, Node
from corral.workflows.render_slurm import Ctx, Files, component_files, vendor_source


def _node(c: Ctx, node: Node) -> Files:
    from corral.deploy.kubernetes import KEY, PIN, SOURCE, pin, source
    from corral.render.kubernetes import node_files
    version = c.cluster.spec.kubernetes.version
    out: Files = dict(node_files(c.cluster, node))
    if vendor_source(c, "Kubernetes", KEY):
        out[SOURCE] = source(version)
    out[PIN] = pin(version)
    return out


def _cluster(c: Ctx, node: Node) -> Files:
    from corral.deploy.kubernetes_cluster import HELM_KEY
    from corral.render.k8s_releases import HELM_SOURCE, control_plane_files
    from corral.render.kubernetes import first_control_plane
    if node.name != first_control_plane(c.cluster).name:  # the releases are applied from there
        return {}
    files: Files = dict(control_plane_files(c.cluster))
    if not vendor_source(c, "Helm", HELM_KEY):  # the bundle's repository carries Helm
        files.pop(HELM_SOURCE)
    return files


RENDERERS: dict[str, Callable[[Ctx, Node], Files]] = {"kubernetes node": _node, "kubernetes cluster": _cluster}


def kubernetes_files(cluster: Cluster) -> tuple[dict[str, Files], dict[str, str], list[str]]:
    """`corral render`'s view (spec/schedulers.py): every node's files, the cluster-level objects, the notes."""
    from corral.render.gpu_operator import cluster_files
    from corral.spec.rules_kubernetes import NOT_RUN
    from corral.workflows.render_slurm import RENDERERS as SHARED
    c = Ctx(cluster, {}, (0, 0), {})  # no Slurm: its version and the hardware facts are read by none of these
    per_node = component_files(c, {**SHARED, **RENDERERS})
    notes = [NOT_RUN + ".",
             "Join tokens and the certificate key are made at join time and never written: a JoinConfiguration holds "
             "@JOIN_TOKEN@, @CA_HASH@ and @CERT_KEY@, which corral-kubeadm-join fills in a private temporary copy.",
             f"PATH{BLOCK} is corral's marked block in PATH; the rest of that file stays the node's.", *c.notes]
    notes += [f"{what} skipped on {', '.join(nodes)}: {reason}." for (what, reason), nodes in c.skipped.items()]
    return per_node, cluster_files(cluster), notes
