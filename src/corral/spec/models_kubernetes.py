"""The `kubernetes:` section (scheduler: kubernetes; docs/components/kubernetes.md): the pinned version,
the pod and service networks, the CNI, the control plane (one node, or three or more behind a virtual IP
held by kube-vip) and the NVIDIA GPU Operator. Rules in spec/rules_kubernetes.py; rendering in
render/kubernetes.py (kubeadm's configuration, containerd, kube-vip) and render/gpu_operator.py."""

from __future__ import annotations

import ipaddress
from typing import Annotated, Literal

from pydantic import Field, StringConstraints

from corral.spec.models_base import Strict
from corral.spec.models_slurm import HOSTLIST

K8S_VERSION = r"^1\.[0-9]{2}\.[0-9]{1,2}$"  # 1.28 and later: spec/rules_kubernetes.py
CNI_VERSIONS = {"calico": "3.29.1", "cilium": "1.16.5"}
# a label or taint key: an optional DNS-subdomain prefix and `/`, then a name of at most 63 characters
LABEL_KEY = (r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
             r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")
LABEL_VALUE = r"^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$"
LabelKey = Annotated[str, StringConstraints(pattern=LABEL_KEY, max_length=317)]
LabelValue = Annotated[str, StringConstraints(pattern=LABEL_VALUE)]


class Taint(Strict):
    """A taint: pods without a matching toleration are kept off (NoSchedule), preferably off, or evicted."""

    key: LabelKey = Field(description="the taint's key, e.g. nvidia.com/gpu or dedicated")
    value: LabelValue = Field(default="", description="its value (may be empty)")
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] = Field(default="NoSchedule",
                                                                           description="NoSchedule, PreferNoSchedule "
                                                                                       "or NoExecute")


class NodeSettings(Strict):
    """Labels and taints of some nodes (set at join time, and by kubectl on nodes already in the cluster)."""

    names: str = Field(pattern=HOSTLIST, description="node names of the spec (a hostlist: gpu[01-04])")
    labels: dict[LabelKey, LabelValue] = Field(default_factory=dict, description="labels, e.g. {team: vision}")
    taints: list[Taint] = Field(default_factory=list, description="taints, e.g. [{key: dedicated, value: training}]")


class CniSpec(Strict):
    """The pod network: Calico or Cilium, at a pinned version."""

    plugin: Literal["calico", "cilium"] = Field(default="calico", description="calico or cilium")
    version: str | None = Field(default=None, pattern=r"^\d+\.\d+\.\d+$",
                                description="the plugin's release; unset: corral's pinned one (calico 3.29.1, "
                                            "cilium 1.16.5)")

    def pinned(self) -> str:
        return self.version or CNI_VERSIONS[self.plugin]


class ControlPlaneEndpoint(Strict):
    """The API server's address for an HA control plane: a virtual IP that kube-vip moves between the
    control-plane nodes (ARP), on the interface that holds their cluster addresses."""

    address: ipaddress.IPv4Address = Field(description="the virtual IP: in the control-plane nodes' subnet, no "
                                                       "node's address")
    interface: str = Field(pattern=r"^[a-zA-Z][a-zA-Z0-9_.-]{0,14}$",
                           description="the network interface kube-vip announces it on, e.g. eth0 or bond0")
    port: int = Field(default=6443, ge=1, le=65535, description="the API server port behind the virtual IP")


class GpuOperatorDriver(Strict):
    """Who provides the NVIDIA driver on the workers."""

    source: Literal["operator", "preinstalled"] = Field(
        default="operator", description="operator: the GPU Operator's driver container at nvidia.driver.version; "
                                        "preinstalled: the driver on the host (the Operator's driver.enabled=false)")


class GpuOperatorSpec(Strict):
    """NVIDIA's GPU Operator (Helm chart gpu-operator), values rendered from the spec."""

    version: str = Field(default="v24.9.1", pattern=r"^v\d+\.\d+\.\d+$", description="the Helm chart's version")
    driver: GpuOperatorDriver = Field(default=GpuOperatorDriver(), description="the driver's source")
    mig_strategy: Literal["none", "single", "mixed"] = Field(
        default="none", description="how MIG devices are exposed (the device plugin's migStrategy); the layouts "
                                    "are the nodes' gpus.mig, as for Slurm")
    service_monitor: bool = Field(default=True, description="a ServiceMonitor for dcgm-exporter "
                                                            "(kube-prometheus-stack scrapes GPU metrics)")


class KubernetesSpec(Strict):
    """A kubeadm cluster (scheduler: kubernetes)."""

    version: str = Field(default="1.31.4", pattern=K8S_VERSION,
                         description="Kubernetes version, pinned (kubeadm, kubelet, kubectl held at it)")
    pod_cidr: ipaddress.IPv4Network = Field(default=ipaddress.IPv4Network("10.244.0.0/16"),
                                            description="the pods' network (no overlap with the nodes' or services')")
    service_cidr: ipaddress.IPv4Network = Field(default=ipaddress.IPv4Network("10.96.0.0/12"),
                                                description="the services' network (no overlap with the others)")
    cni: CniSpec = Field(default=CniSpec(), description="the pod network plugin")
    control_plane_endpoint: ControlPlaneEndpoint | None = Field(
        default=None, description="the virtual IP of an HA control plane (three or more control-plane nodes); "
                                  "unset: the single control-plane node's address")
    gpu_operator: GpuOperatorSpec = Field(default=GpuOperatorSpec(), description="the NVIDIA GPU Operator")
    nodes: list[NodeSettings] = Field(default_factory=list, description="labels and taints per node (a node's "
                                                                        "role and MIG labels are corral's own)")
