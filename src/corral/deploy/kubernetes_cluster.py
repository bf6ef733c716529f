"""What the first control-plane node applies to a Kubernetes cluster (scheduler: kubernetes; docs/components/
kubernetes.md), after `kubeadm init`: Helm from its apt repository (key pinned by fingerprint, version
pinned), then each Helm release of render/k8s_releases.py in order (the pod network, kube-prometheus-stack,
the GPU Operator, with the MIG manager's ConfigMap before it), and the spec's node labels on every
registered node, and its taints. Each is compared with what the cluster holds (facts/kubernetes.KubeCluster, one command):
a release deployed at its chart version with unchanged values, and labels already set, are no-ops.
Proven by operation tests (tests/operations/k8s_helm_release, k8s_labels), not against a live cluster."""

from __future__ import annotations

import hashlib
import shlex

from pyinfra import host
from pyinfra.api import deploy, operation

from corral.deploy import operations
from corral.deploy.apt_keys import pinned_key
from corral.deploy.nodestate import Want, snapshot
from corral.engine.notes import annotate
from corral.engine.shell import cmd
from corral.facts.kubernetes import ADMIN_CONF, KubeCluster
from corral.render import k8s_releases as rel
from corral.render.gpu_operator import node_labels, node_taints
from corral.render.kubernetes import first_control_plane

HELM_KEY, HELM_SOURCE, HELM_PIN, MIG_MANIFEST = "/etc/apt/keyrings/helm.gpg", rel.HELM_SOURCE, rel.HELM_PIN, rel.MIG_MANIFEST
RELEASE_NAMES = ("calico", "cilium", "kube-prometheus-stack", "gpu-operator")
WANT = Want(paths=(HELM_KEY, HELM_SOURCE, HELM_PIN, rel.VALUES_DIR, MIG_MANIFEST,
                   *(f"{rel.VALUES_DIR}/{n}-values.yaml" for n in RELEASE_NAMES)), packages=("helm",))
HELM_TIMEOUT_S = 900  # helm's own --wait is 10 minutes


def helm_command(r: rel.Release):
    return cmd("timeout", str(HELM_TIMEOUT_S), "helm", "upgrade", "--install", r.name, r.chart, "--repo", r.repo,
               "--version", r.version, "--namespace", r.namespace, "--create-namespace", "--values", r.values_path,
               "--wait", "--timeout", "10m", "--kubeconfig", ADMIN_CONF)


@operation()
def helm_release(release: rel.Release, want: Want):
    """`helm upgrade --install` when the release is missing, not deployed, at another chart version, or its
    values file changes in this run; else a no-op."""
    have = host.get_fact(KubeCluster).releases.get(release.name)
    old = (snapshot(want).files.get(release.values_path) or {}).get("sha256")
    same_values = old == hashlib.sha256(release.values.encode()).hexdigest()
    if have is not None and have.status == "deployed" and have.chart == release.chart_label and same_values:
        host.noop(f"{release.name}: {release.chart_label} deployed")
        return
    if have is None:
        why, disruption = "install", "none (a new release)"
    elif have.chart != release.chart_label or have.status != "deployed":
        why, disruption = f"{have.chart} ({have.status}) -> {release.chart_label}", f"restart {release.name}'s pods"
    else:
        why, disruption = "its values changed", f"restart {release.name}'s pods"
    annotate(disruption=disruption, diff=f"helm upgrade --install {release.name} {release.chart} "
                                         f"{release.version} (namespace {release.namespace}): {why}\n")
    yield helm_command(release)


@operation()
def labels(wanted: dict[str, dict[str, str]]):
    """The spec's labels on every node the cluster has registered (a node not joined yet gets them when it
    joins: workflows/k8s_join.py); labels corral does not set are left alone."""
    state = host.get_fact(KubeCluster)
    todo = {}
    for node, want in sorted(wanted.items()):
        have = state.labels.get(node)
        if have is not None and any(have.get(k) != v for k, v in want.items()):
            todo[node] = {k: v for k, v in sorted(want.items()) if have.get(k) != v}
    if not todo:
        host.noop("the spec's labels are set" if state.up else "the cluster is not up yet: labels after init")
        return
    annotate(disruption="none", diff="".join(f"{n}: {k}={v}\n" for n, kv in todo.items() for k, v in kv.items()))
    for node, kv in todo.items():
        yield cmd("timeout", "60", "kubectl", "--kubeconfig", ADMIN_CONF, "label", "node", "--overwrite", node,
                  *(f"{k}={v}" for k, v in kv.items()))


@operation()
def taints(wanted: dict[str, list[str]]):
    """The spec's taints (key=value:Effect) on every registered node that lacks one; a taint corral did not
    set is left alone (a node not joined yet gets them at registration: its JoinConfiguration)."""
    state = host.get_fact(KubeCluster)
    todo = {node: [t for t in want if t not in state.taints.get(node, [])]
            for node, want in sorted(wanted.items()) if node in state.labels}
    todo = {node: missing for node, missing in todo.items() if missing}
    if not todo:
        host.noop("the spec's taints are set" if state.up else "the cluster is not up yet: taints after init")
        return
    annotate(disruption="none (new pods without a toleration stay off; NoExecute evicts)",
             diff="".join(f"{n}: {t}\n" for n, ts in todo.items() for t in ts))
    for node, missing in todo.items():
        yield cmd("timeout", "60", "kubectl", "--kubeconfig", ADMIN_CONF, "taint", "node", "--overwrite", node, *missing)


@deploy("kubernetes cluster")
def kubernetes_cluster() -> None:
    node, cluster = host.data.corral_node, host.data.corral_cluster
    if node.name != first_control_plane(cluster).name:
        operations.skip(name="Helm releases", reason=f"applied from {first_control_plane(cluster).name}")
        return
    files = rel.control_plane_files(cluster)
    if cluster.spec.packages.source != "bundle":
        pinned_key(name="Helm signing key", path=HELM_KEY, url=rel.HELM_KEY_URL, fingerprint=rel.HELM_KEY_FINGERPRINT,
                   what="Helm's apt key", dearmor=True, want=WANT)
        listed = operations.managed_file(name="Helm apt source", path=HELM_SOURCE, want=WANT, content=files[HELM_SOURCE])
        operations.run_when_changed(name="apt lists refreshed (Helm source)", description="apt-get update",
                                    commands=["DEBIAN_FRONTEND=noninteractive apt-get update -q"],
                                    _if=listed.did_change)
    operations.managed_file(name="Helm version pin", path=HELM_PIN, want=WANT, content=files[HELM_PIN])
    operations.packages(name="Helm", names=["helm"], want=WANT)
    operations.directory(name=rel.VALUES_DIR, path=rel.VALUES_DIR, want=WANT, mode="700")
    for r in rel.releases(cluster):
        if r.name == "gpu-operator" and MIG_MANIFEST in files:
            changed = operations.managed_file(name=MIG_MANIFEST, path=MIG_MANIFEST, want=WANT, mode="600",
                                              content=files[MIG_MANIFEST])
            operations.run_when_changed(name="MIG layouts applied", description="kubectl apply (MIG ConfigMap)",
                                        commands=[f"timeout 60 kubectl --kubeconfig {ADMIN_CONF} apply -f "
                                                  f"{shlex.quote(MIG_MANIFEST)}"], _if=changed.did_change)
        operations.managed_file(name=r.values_path, path=r.values_path, want=WANT, mode="600",
                                content=files[r.values_path])
        helm_release(name=f"helm release {r.name}", release=r, want=WANT)
    labels(name="node labels", wanted=node_labels(cluster))
    taints(name="node taints", wanted=node_taints(cluster))
