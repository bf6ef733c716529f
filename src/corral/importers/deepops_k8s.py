"""DeepOps' (Kubespray's) Kubernetes variables -> cluster.yaml's `kubernetes:` (scheduler: kubernetes):
the version, the pod and service networks, the network plugin, kube-vip's address and interface, the GPU
Operator's MIG strategy and a preinstalled driver. A value that cannot be carried exactly is listed with
the key to set instead (never dropped silently)."""

from __future__ import annotations

import ipaddress
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from corral.importers.deepops_inventory import Var
from corral.importers.deepops_report import Report
from corral.importers.deepops_vars import truthy

K8S_VARS = ("gpu_operator_driver_version", "kube_version", "kube_pods_subnet", "kube_service_addresses",
            "kube_network_plugin", "k8s_gpu_mig_strategy", "gpu_operator_preinstalled_nvidia_software",
            "kube_vip_address", "kube_vip_interface", "kube_vip_enabled")
VERSION = re.compile(r"^v?(1\.(\d+)\.\d+)$")
DRIVER_VERSION = re.compile(r"^\d+(\.\d+){1,3}$")  # DriverSpec.version
INTERFACE = re.compile(r"^[a-zA-Z][a-zA-Z0-9_.-]{0,14}$")


@dataclass
class KubernetesImport:
    get: Callable[[str], Var | None]
    lines: list[str] = field(default_factory=list)  # YAML under `kubernetes:`
    report: Report = field(default_factory=Report)
    driver_version: str | None = None  # gpu_operator_driver_version, for nvidia.driver.version
    used: set[str] = field(default_factory=set)

    def note(self, name: str, var: Var, why: str, key: str = "") -> None:
        """Not carried; with `key`: changed on purpose (carried to key, differently)."""
        if key:
            self.report.change(var.where, name, why, key)
        else:
            self.report.note(var.where, name, why)

    def run(self) -> KubernetesImport:
        found = {n: v for n in K8S_VARS if (v := self.get(n)) is not None}
        self.used |= set(found)
        text = {n: str(v.value).strip() for n, v in found.items()}
        for n, t in list(text.items()):
            if "{{" in t or "{%" in t:
                self.note(n, found[n], f"a Jinja template ({t!r}), not evaluated: set it in kubernetes: by hand")
                del text[n]
        if "kube_version" in text:
            m = VERSION.match(text["kube_version"])
            if m and int(m.group(2)) >= 28:
                self.lines.append(f"  version: {json.dumps(m.group(1))}")
            else:
                self.note("kube_version", found["kube_version"], f"{text['kube_version']!r}: corral renders "
                          "Kubernetes 1.28 and later; kubernetes.version is left at corral's pinned default",
                          key="kubernetes.version")
        for name, key in (("kube_pods_subnet", "pod_cidr"), ("kube_service_addresses", "service_cidr")):
            if name in text:
                try:
                    self.lines.append(f"  {key}: {json.dumps(str(ipaddress.IPv4Network(text[name])))}")
                except ValueError:
                    self.note(name, found[name], f"{text[name]!r} is not an IPv4 network: set kubernetes.{key}")
        plugin = text.get("kube_network_plugin")
        if plugin in ("calico", "cilium"):
            self.lines.append(f"  cni: {{plugin: {plugin}}}")
        elif plugin is not None:
            self.note("kube_network_plugin", found["kube_network_plugin"], f"{plugin!r}: corral installs calico "
                      "or cilium (kubernetes.cni.plugin); calico is imported", key="kubernetes.cni.plugin")
        self.endpoint(found, text)
        operator = []
        mig = text.get("k8s_gpu_mig_strategy")
        if mig in ("none", "single", "mixed"):
            operator.append(f"mig_strategy: {mig}")
        elif mig is not None:
            self.note("k8s_gpu_mig_strategy", found["k8s_gpu_mig_strategy"], f"{mig!r} is not none, single or "
                      "mixed: set kubernetes.gpu_operator.mig_strategy")
        pre = found.get("gpu_operator_preinstalled_nvidia_software")
        if pre is not None and truthy(pre, False):
            operator.append("driver: {source: preinstalled}")
        if operator:
            self.lines.append(f"  gpu_operator: {{{', '.join(operator)}}}")
        self.operator_driver(found, text, pre is not None and truthy(pre, False))
        return self

    def operator_driver(self, found: dict[str, Var], text: dict[str, str], preinstalled: bool) -> None:
        """gpu_operator_driver_version: the Operator's driver container, nvidia.driver.version in corral."""
        name = "gpu_operator_driver_version"
        if name not in text:
            return
        if preinstalled:
            return self.note(name, found[name], "not used: gpu_operator_preinstalled_nvidia_software is true (the "
                             "host's driver; DeepOps' nvidia_driver_* variables set it)")
        if not DRIVER_VERSION.match(text[name]):
            return self.note(name, found[name], f"{text[name]!r} is not a driver version like 580.126.20: set "
                             "nvidia.driver.version")
        self.driver_version = text[name]

    def endpoint(self, found: dict[str, Var], text: dict[str, str]) -> None:
        """kube-vip's virtual IP (Kubespray's kube_vip_*) -> kubernetes.control_plane_endpoint."""
        if "kube_vip_address" not in text or not truthy(found.get("kube_vip_enabled"), True):
            return
        interface = text.get("kube_vip_interface")
        try:
            address = ipaddress.IPv4Address(text["kube_vip_address"])
        except ValueError:
            return self.note("kube_vip_address", found["kube_vip_address"], f"{text['kube_vip_address']!r} is not "
                             "an IPv4 address: set kubernetes.control_plane_endpoint.address")
        if interface is None or not INTERFACE.match(interface):
            return self.note("kube_vip_address", found["kube_vip_address"], "no usable kube_vip_interface: set "
                             f"kubernetes.control_plane_endpoint: {{address: {address}, interface: <the "
                             "control-plane nodes' interface>}")
        self.lines.append(f"  control_plane_endpoint: {{address: {address}, interface: {interface}}}")
