"""scheduler: kubernetes (docs/components/kubernetes.md): the nodes' head (components/common.py), then each
node's prerequisites, tools and kubeadm init, then what the first control-plane node applies to the
cluster. Joins follow the run (workflows/k8s_join.py)."""

from __future__ import annotations

from corral.components import Component, gives
from corral.components.common import HEAD

TOOLS = ("kubeadm", "kubelet", "kubectl")  # from pkgs.k8s.io


def _runtime(cluster, node) -> dict[str, str]:
    return gives(["containerd"], "kubernetes (container runtime)")


def _tools(cluster, node) -> dict[str, str]:
    return gives(TOOLS, "kubernetes (pkgs.k8s.io)")


def _helm(cluster, node) -> dict[str, str]:
    return gives(["helm"], "kubernetes (Helm's repository)")


COMPONENTS = (*HEAD,
              Component("kubernetes node", packages=_runtime,
                        vendor=_tools),
              # kubeadm init on the first control-plane node; what it applies needs the API server up
              Component("kubernetes cluster",
                        waits=("kubernetes node",), vendor=_helm))
