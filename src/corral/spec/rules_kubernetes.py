"""Rules of the `kubernetes:` section (scheduler: kubernetes), each a located error: the pod and service
networks overlap neither each other nor a node's address; the control plane is not two nodes (etcd's
quorum: two stop at the first failure); a virtual IP (three or more control-plane nodes; without one, a
warning) lies in their subnet and is no node's address; the version is 1.28 or later; MIG strategy single needs one layout per node. The Operator's driver without
nvidia.driver.version is a warning (the chart's default, unpinned)."""

from __future__ import annotations

import ipaddress
from collections.abc import Callable
from typing import TYPE_CHECKING

from corral.errors import Problem

if TYPE_CHECKING:
    from corral.spec.cluster import Cluster

Where = Callable[..., str]
NOT_RUN = ("Kubernetes path: not yet run against a live cluster by corral's tests (its configuration, manifests "
           "and Helm values are rendered and checked offline; docs/components/kubernetes.md)")


def check_kubernetes(cluster: Cluster, where: Where) -> list[Problem]:
    """The kubernetes: section's rules (spec/schedulers.py runs them for scheduler: kubernetes)."""
    k, problems = cluster.spec.kubernetes, []
    pod, svc = k.pod_cidr, k.service_cidr
    if pod.overlaps(svc):
        problems.append(Problem(where(("kubernetes", "service_cidr")), f"the service network {svc} overlaps the pod "
                                f"network {pod}", str(svc), "give pods and services separate ranges (defaults: "
                                                            "10.244.0.0/16 and 10.96.0.0/12)"))
    for key, net in (("pod_cidr", pod), ("service_cidr", svc)):
        inside = [n for n in cluster.nodes if ipaddress.IPv4Address(n.address) in net]
        if inside:
            held = ", ".join(f"{n.name} {n.address}" for n in inside[:3])
            problems.append(Problem(where(("kubernetes", key)), f"{net} holds node addresses ({held}): pods and "
                                    "services would shadow the nodes", str(net), "pick a range no node address is in"))
    cps = cluster.with_role("control-plane")
    ep = k.control_plane_endpoint
    if len(cps) == 2:
        problems.append(Problem(where(("nodes",)), "two control-plane nodes: etcd needs a majority, so the cluster "
                                "stops when either fails (no better than one)", "2 control-plane nodes",
                                "use one control-plane node, or three or more with kubernetes.control_plane_endpoint"))
    minor = int(k.version.split(".")[1])
    if minor < 28:
        problems.append(Problem(where(("kubernetes", "version")), f"Kubernetes {k.version} is out of support; corral "
                                "renders for 1.28 and later", k.version, "set kubernetes.version to 1.28 or later"))
    if ep is not None:
        taken = [n.name for n in cluster.nodes if n.address == str(ep.address)]
        subnets = {ipaddress.IPv4Network(f"{n.address}/24", strict=False) for n in cps}
        if taken:
            problems.append(Problem(where(("kubernetes", "control_plane_endpoint", "address")),
                                    f"the virtual IP {ep.address} is {taken[0]}'s address", str(ep.address),
                                    "a free address in the control-plane nodes' subnet"))
        elif not any(ep.address in s for s in subnets):
            problems.append(Problem(where(("kubernetes", "control_plane_endpoint", "address")),
                                    f"the virtual IP {ep.address} is not in the control-plane nodes' subnet "
                                    f"({', '.join(sorted(str(s) for s in subnets))}): kube-vip announces it by ARP",
                                    str(ep.address), "a free address beside the control-plane nodes'"))
        if len(cps) < 3:
            problems.append(Problem(where(("kubernetes", "control_plane_endpoint")), f"a virtual IP with "
                                    f"{len(cps)} control-plane node(s): an HA control plane needs three or more",
                                    str(ep.address), "add control-plane nodes, or drop control_plane_endpoint"))
    problems += _node_settings(cluster, where)
    op = k.gpu_operator
    if op.mig_strategy == "single":
        for n in cluster.with_role("worker"):
            from corral.spec.mig import layout
            lay = layout(n.gpus) or {}
            profiles = {p for ps in lay.values() for p in ps}
            if profiles and any(not ps for ps in lay.values()):
                problems.append(Problem(where(("kubernetes", "gpu_operator", "mig_strategy")),
                                        f"{n.name}: mig_strategy single needs MIG on every GPU of a node with a "
                                        "layout (some have none)", "single", "use mig_strategy: mixed"))
                break
            if len(profiles) > 1:
                problems.append(Problem(where(("kubernetes", "gpu_operator", "mig_strategy")),
                                        f"{n.name}: mig_strategy single exposes one kind of MIG device per node, its "
                                        f"layout has {', '.join(sorted(profiles))}", "single",
                                        "use mig_strategy: mixed (each profile its own resource)"))
                break
    return problems


def kubernetes_warnings(cluster: Cluster) -> list[str]:
    """Said on every spec check, plan and apply of scheduler: kubernetes (spec/schedulers.py)."""
    out = [NOT_RUN]
    cps = cluster.with_role("control-plane")
    if len(cps) >= 3 and cluster.spec.kubernetes.control_plane_endpoint is None:
        out.append(f"kubernetes: {len(cps)} control-plane nodes and no control_plane_endpoint: the API server's "
                   f"address is {cps[0].name}'s, so the cluster's clients lose it with {cps[0].name}; set "
                   "kubernetes.control_plane_endpoint (a virtual IP held by kube-vip) for an HA endpoint")
    if cluster.spec.kubernetes.gpu_operator.driver.source == "operator" and cluster.spec.nvidia.driver is None and any(
            n.gpu_count for n in cluster.with_role("worker")):
        out.append("kubernetes.gpu_operator.driver: the GPU Operator installs its chart's default driver, not pinned: "
                   "set nvidia.driver.version (e.g. 550.127.05) to pin it, or source: preinstalled")
    return out


OWN_LABELS = ("node-role.kubernetes.io/", "nvidia.com/mig.config")  # set by corral (render/gpu_operator.py)
RESERVED = ("kubernetes.io/", "k8s.io/")  # the kubelet's and Kubernetes' own prefixes


def _node_settings(cluster: Cluster, where: Where) -> list[Problem]:
    from corral.spec.hosts import RangeError, expand_names
    known, problems = {n.name for n in cluster.nodes}, []
    for i, entry in enumerate(cluster.spec.kubernetes.nodes):
        at = ("kubernetes", "nodes", i)
        try:
            unknown = [n for n in expand_names(entry.names) if n not in known]
        except RangeError as exc:
            problems.append(Problem(where((*at, "names")), str(exc), entry.names, "write names like 'gpu[01-02]'"))
            continue
        if unknown:
            problems.append(Problem(where((*at, "names")), f"not nodes of this spec: {', '.join(unknown[:5])}",
                                    entry.names, "name nodes of the spec's nodes: list"))
        for key in entry.labels:
            prefix = key.split("/")[0] + "/" if "/" in key else ""
            if key.startswith(OWN_LABELS) or any(prefix.endswith(r) for r in RESERVED):
                problems.append(Problem(where((*at, "labels", key)), f"{key!r} is corral's or Kubernetes' own label",
                                        key, "use a key of your own, e.g. example.com/team"))
    return problems
