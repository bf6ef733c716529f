"""What the first control-plane node installs into a Kubernetes cluster with Helm (pure; docs/components/
kubernetes.md), in order: the pod network (Calico's tigera-operator or Cilium, at the spec's pinned
version, on the spec's pod network), kube-prometheus-stack (its ServiceMonitor CRD before the GPU
Operator's dcgm-exporter ServiceMonitor), then the GPU Operator. Each release is one chart at one version
from its publisher's chart repository, with its values in a file on that node; Helm itself comes from
its apt repository, key pinned by fingerprint (deploy/kubernetes_cluster.py)."""

from __future__ import annotations

from dataclasses import dataclass

from corral.render import gpu_operator, kube_prometheus
from corral.render.kubernetes import yaml_text
from corral.spec.cluster import Cluster

VALUES_DIR = "/etc/corral/kubernetes"
HELM_SOURCE, HELM_PIN = "/etc/apt/sources.list.d/helm.list", "/etc/apt/preferences.d/corral-helm"
MIG_MANIFEST = f"{VALUES_DIR}/mig-layouts.yaml"
HELM_REPO = "https://packages.buildkite.com/helm-linux/helm-debian/any/"
HELM_KEY_URL = "https://packages.buildkite.com/helm-linux/helm-debian/gpgkey"
# Helm's Debian repository (hosted by Buildkite): the key the Helm project's install guide pins
HELM_KEY_FINGERPRINT = "DDF78C3E6EBB2D2CC223C95C62BA89D07698DBC6"
HELM_VERSION = "3.16.4"


@dataclass(frozen=True)
class Release:
    name: str
    chart: str
    repo: str
    version: str
    namespace: str
    values: str

    @property
    def values_path(self) -> str:
        return f"{VALUES_DIR}/{self.name}-values.yaml"

    @property
    def chart_label(self) -> str:
        """As `helm list` names the installed chart: <chart>-<version>."""
        return f"{self.chart}-{self.version}"


def _cni(cluster: Cluster) -> Release:
    k = cluster.spec.kubernetes
    version, pods = k.cni.pinned(), str(k.pod_cidr)
    if k.cni.plugin == "calico":
        v = {"installation": {"cni": {"type": "Calico"}, "calicoNetwork": {"ipPools": [
            {"cidr": pods, "encapsulation": "VXLANCrossSubnet", "natOutgoing": "Enabled", "nodeSelector": "all()"}]}}}
        return Release("calico", "tigera-operator", "https://docs.tigera.io/calico/charts", f"v{version}",
                       "tigera-operator", f"# Managed by corral: Calico {version} on the pod network {pods}\n"
                       + yaml_text(v))
    v = {"ipam": {"mode": "cluster-pool", "operator": {"clusterPoolIPv4PodCIDRList": [pods]}}}
    return Release("cilium", "cilium", "https://helm.cilium.io/", version, "kube-system",
                   f"# Managed by corral: Cilium {version} on the pod network {pods}\n" + yaml_text(v))


def releases(cluster: Cluster) -> list[Release]:
    """The releases in the order they are installed."""
    out = [_cni(cluster)]
    if cluster.spec.monitoring.enabled:
        out.append(Release("kube-prometheus-stack", "kube-prometheus-stack",
                           "https://prometheus-community.github.io/helm-charts", kube_prometheus.CHART_VERSION,
                           "monitoring", kube_prometheus.values(cluster)))
    op = cluster.spec.kubernetes.gpu_operator
    out.append(Release("gpu-operator", "gpu-operator", "https://helm.ngc.nvidia.com/nvidia", op.version,
                       gpu_operator.NAMESPACE, gpu_operator.values(cluster)))
    return out


def helm_source() -> str:
    return f"# Managed by corral: Helm\ndeb [signed-by=/etc/apt/keyrings/helm.gpg] {HELM_REPO} any main\n"


def helm_pin() -> str:
    return (f"# Managed by corral: Helm stays at {HELM_VERSION} until corral moves it\n"
            f"Package: helm\nPin: version {HELM_VERSION}-*\nPin-Priority: 1001\n")


def mig_manifest(cluster: Cluster) -> str | None:
    """The GPU Operator's namespace and the MIG manager's ConfigMap, applied before the Operator (None:
    no node has a MIG layout)."""
    cm = gpu_operator.mig_configmap(cluster)
    if cm is None:
        return None
    ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": gpu_operator.NAMESPACE}}
    return "# Managed by corral: the GPU Operator's namespace and MIG layouts\n" + yaml_text(ns) + "---\n" + \
        cm.split("\n", 1)[1]


def control_plane_files(cluster: Cluster) -> dict[str, str]:
    """path -> content of what the first control-plane node gets for the releases (deploy/kubernetes_cluster.py;
    `corral render` writes the same): Helm's apt source and pin, each release's values, the MIG manifest."""
    files = {HELM_SOURCE: helm_source(), HELM_PIN: helm_pin(), **{r.values_path: r.values for r in releases(cluster)}}
    mig = mig_manifest(cluster)
    if mig is not None:
        files[MIG_MANIFEST] = mig
    return files
