"""What a Kubernetes cluster holds, read on the first control-plane node in one command (deploy/
kubernetes_cluster.py): whether the API answers, the Helm releases (`helm list -A -o json`) and each
node's labels and taints (`kubectl get nodes -o json`). Before `kubeadm init` (no admin.conf), or without helm or
kubectl yet, the cluster is "down" and holds nothing: a plan then shows every release to install."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from pyinfra.api import FactBase

ADMIN_CONF = "/etc/kubernetes/admin.conf"
KUBECTL = f"kubectl --kubeconfig {ADMIN_CONF}"  # as root on a control-plane node


@dataclass(frozen=True)
class HelmRelease:
    chart: str       # <chart>-<version>, as helm list names it
    status: str      # deployed | failed | pending-install | ...
    namespace: str


@dataclass(frozen=True)
class KubeState:
    up: bool
    releases: dict[str, HelmRelease] = field(default_factory=dict)
    labels: dict[str, dict[str, str]] = field(default_factory=dict)
    taints: dict[str, list[str]] = field(default_factory=dict)  # node -> ["key=value:Effect", ...]


class KubeCluster(FactBase):
    """KubeState of the cluster, as its first control-plane node sees it (bounded: 30 s per call)."""

    @staticmethod
    def default() -> KubeState:
        return KubeState(up=False)

    def command(self) -> str:
        k = f"--kubeconfig {ADMIN_CONF}"
        return (f"if [ -s {ADMIN_CONF} ] && command -v kubectl >/dev/null && "
                f"n=$(timeout 30 kubectl {k} get nodes -o json 2>/dev/null); then "
                "echo '--- up'; echo '--- releases'; "
                f"if command -v helm >/dev/null; then timeout 30 helm list -A -o json {k} 2>/dev/null || echo '[]'; "
                "else echo '[]'; fi; echo '--- nodes'; printf '%s\\n' \"$n\"; else echo '--- down'; fi; true")

    def process(self, output: list[str]) -> KubeState:
        lines = [line.rstrip("\n") for line in output]
        if "--- up" not in lines:
            return KubeState(up=False)
        r, n = lines.index("--- releases"), lines.index("--- nodes")
        releases = {}
        for item in json.loads("\n".join(lines[r + 1:n]) or "[]"):
            releases[item["name"]] = HelmRelease(item.get("chart", ""), item.get("status", ""), item.get("namespace", ""))
        nodes = json.loads("\n".join(lines[n + 1:]) or "{}")
        items = nodes.get("items", [])
        labels = {i["metadata"]["name"]: dict(i["metadata"].get("labels") or {}) for i in items}
        taints = {i["metadata"]["name"]: [taint_text(t) for t in (i.get("spec") or {}).get("taints") or []]
                  for i in items}
        return KubeState(up=True, releases=releases, labels=labels, taints=taints)


def taint_text(t: dict) -> str:
    """A taint as kubectl taint writes it: key=value:Effect (key:Effect without a value)."""
    value = t.get("value") or ""
    return f"{t.get('key', '')}{'=' + value if value else ''}:{t.get('effect', '')}"
