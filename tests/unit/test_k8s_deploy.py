"""The whole Kubernetes node deploy (deploy/kubernetes.py) against a node's state: a converged node gives
zero changes, a new worker gives exactly its install and its pending join. Each operation the deploy
calls is run (its undecorated generator, as in test_operations_data.py) with the state a converged or a
new node would report; ops that only run after a change (`_if=`) are not run, as on a converged node."""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from pyinfra.context import ctx_host

sys.path.insert(0, str(Path(__file__).parent))
from test_kubernetes_render import GOLDEN  # noqa: E402
from test_operations_data import FakeHost  # noqa: E402

from corral.deploy import kubernetes as kdeploy  # noqa: E402
from corral.deploy import kubernetes_cluster as kcluster  # noqa: E402
from corral.deploy import operations  # noqa: E402
from corral.deploy.nodestate import Snapshot  # noqa: E402
from corral.engine import notes  # noqa: E402
from corral.render.kubernetes import node_files  # noqa: E402
from corral.spec.loader import load  # noqa: E402

from corral.facts.kubernetes import HelmRelease, KubeState  # noqa: E402
from corral.render import k8s_releases  # noqa: E402
from corral.render.gpu_operator import node_labels, node_taints  # noqa: E402

OPS = {operations: ("managed_file", "run_when_changed", "package_install", "service", "restart", "directory", "skip"),
       kdeploy: ("swap_off", "tools_held", "kubeadm_init", "join_pending", "pinned_key", "version_pending"),
       kcluster: ("helm_release", "labels", "taints", "pinned_key")}
MODES = {kdeploy.CONFIG: "600", kdeploy.KUBE_VIP: "600", kdeploy.JOIN_SCRIPT: "700"}


def _calls(monkeypatch, cluster, node) -> list[tuple[str, object, dict]]:
    """The deploy's operation calls for `node`, in order: (name, operation, arguments)."""
    calls = []
    for module, names in OPS.items():
        for name in names:
            op = getattr(module, name)

            def record(*, _op=op, **kwargs):
                calls.append((kwargs.pop("name"), _op, kwargs))
                return SimpleNamespace(did_change=lambda: False)
            monkeypatch.setattr(module, name, record)
    with ctx_host.use(SimpleNamespace(data=SimpleNamespace(corral_node=node, corral_cluster=cluster),
                                      name=node.name, state=SimpleNamespace())):
        kdeploy.kubernetes_node._inner()
        kcluster.kubernetes_cluster._inner()
    return calls


def _state(cluster, node, joined: bool) -> tuple[Snapshot, dict]:
    mine, modes = dict(node_files(cluster, node)), dict(MODES)
    if node.name == cluster.with_role("control-plane")[0].name:
        mine.update({r.values_path: r.values for r in k8s_releases.releases(cluster)}, **{
            kcluster.HELM_SOURCE: k8s_releases.helm_source(), kcluster.HELM_PIN: k8s_releases.helm_pin()})
        if k8s_releases.mig_manifest(cluster):
            mine[kcluster.MIG_MANIFEST] = k8s_releases.mig_manifest(cluster)
        modes.update({kcluster.MIG_MANIFEST: "600", **{r.values_path: "600" for r in k8s_releases.releases(cluster)}})
    files = {path: {"kind": "file", "mode": modes.get(path, "644"), "user": "root", "group": "root",
                    "sha256": hashlib.sha256(text.encode()).hexdigest()} for path, text in mine.items()} if joined else {}
    if joined:
        files[kdeploy.KEY] = {"kind": "file", "mode": "644", "user": "root", "group": "root", "sha256": "0" * 64}
        files[kdeploy.SOURCE] = {"kind": "file", "mode": "644", "user": "root", "group": "root",
                                 "sha256": hashlib.sha256(kdeploy.source(cluster.spec.kubernetes.version).encode()).hexdigest()}
        files[kdeploy.PIN] = {"kind": "file", "mode": "644", "user": "root", "group": "root",
                              "sha256": hashlib.sha256(kdeploy.pin(cluster.spec.kubernetes.version).encode()).hexdigest()}
        files[kdeploy.KUBELET_CONF] = files[kdeploy.KEY]  # every node of a cluster has joined (or inited)
        if "control-plane" in node.roles:
            files[kdeploy.ADMIN_CONF] = files[kcluster.HELM_KEY] = files[kdeploy.KEY]
            files[k8s_releases.VALUES_DIR] = {"kind": "dir", "mode": "700", "user": "root", "group": "root"}
    tools = {t: f"{cluster.spec.kubernetes.version}-1.1" for t in kdeploy.TOOLS}
    held = {"labels": node_labels(cluster), "taints": node_taints(cluster), "releases": {r.name: HelmRelease(r.chart_label, "deployed", r.namespace)
                                                          for r in k8s_releases.releases(cluster)}}
    snap = Snapshot(files=files, services={"containerd": ("active", "enabled")} if joined else {},
                    packages={"containerd": "1.6.20~ds1-1", "helm": "3.16.4-1", **tools} if joined else {}, blocks={},
                    apt_lists_age_s=60, container="none")
    facts = {"FileContents": {"/proc/swaps": ["Filename Type Size Used Priority"],
                              "/etc/fstab": ["UUID=1 / ext4 defaults 0 1"]},
             "AptHolds": {" ".join(kdeploy.TOOLS): [list(kdeploy.TOOLS), [], list(kdeploy.TOOLS)] if joined else [[], [], []]},
             "KubeCluster": KubeState(up=True, **held) if joined else KubeState(up=False)}
    return snap, facts


def _run(cluster, node, calls, joined: bool) -> dict[str, list[str]]:
    """name -> the commands each called operation yields on this node's state ([] for a no-op)."""
    snap, facts = _state(cluster, node, joined)
    out = {}
    for name, op, kwargs in calls:
        if "_if" in kwargs:
            continue  # runs only after a change
        fake = FakeHost({"facts": facts})
        fake.snapshot, fake.name = snap, node.name
        fake.data.update(corral_node=node, corral_cluster=cluster)
        notes.take(fake.name, "case")
        with ctx_host.use(fake):
            cmds = list(getattr(op, "_inner", op)(**kwargs))
        notes.take(fake.name, "case")
        out[name] = cmds
    return out


@pytest.mark.parametrize("case", ["ha", "single"])
def test_a_converged_cluster_gives_zero_changes(monkeypatch, case):
    cluster = load(str(GOLDEN / case / "cluster.yaml"))
    for node in cluster.nodes:
        calls = _calls(monkeypatch, cluster, node)
        changed = {name: cmds for name, cmds in _run(cluster, node, calls, joined=True).items() if cmds}
        assert changed == {}, f"{node.name}: a converged node would change: {changed}"
        monkeypatch.undo()


def test_a_new_worker_installs_and_has_a_pending_join_never_an_init(monkeypatch):
    cluster = load(str(GOLDEN / "ha" / "cluster.yaml"))
    calls = _calls(monkeypatch, cluster, cluster.node("gpu01"))
    changed = [name for name, cmds in _run(cluster, cluster.node("gpu01"), calls, joined=False).items() if cmds]
    assert "join pending" in changed and "kubeadm init" not in [c[0] for c in calls]
    assert changed[-2:] == [kdeploy.JOIN_SCRIPT, "join pending"]
    assert {"the Kubernetes tools", "containerd", "Kubernetes signing key", kdeploy.CONFIG} <= set(changed)
    assert "kube-vip" not in changed  # a worker holds no virtual IP


def test_the_first_control_plane_inits_and_the_others_join(monkeypatch):
    cluster = load(str(GOLDEN / "ha" / "cluster.yaml"))
    names = {n: [c[0] for c in _calls(monkeypatch, cluster, cluster.node(n))] for n in ("cp1", "cp2")}
    init = names["cp1"].index("kubeadm init")
    assert names["cp1"][init - 1] == "kube-vip" and "join pending" not in names["cp1"]
    assert names["cp2"][-4:] == ["kube-vip", kdeploy.JOIN_SCRIPT, "join pending", "Helm releases"]  # a skip
    # the first control-plane node applies the cluster's releases after init: the pod network first, the GPU
    # Operator last, its MIG layouts before it (ha has MIG layouts), then the labels
    after = names["cp1"][init + 1:]
    releases = [n for n in after if n.startswith("helm release")]
    assert releases == ["helm release calico", "helm release kube-prometheus-stack", "helm release gpu-operator"]
    assert after.index("MIG layouts applied") < after.index("helm release gpu-operator")
    assert after[-2:] == ["node labels", "node taints"]


def test_the_virtual_cluster_refuses_kubernetes_before_anything_runs(tmp_path):
    from corral.errors import UsageError
    from corral.spec.loader import load_text
    from corral.virtual.cluster import VirtualCluster
    from corral.workflows.converge import converge
    text = (GOLDEN / "single" / "cluster.yaml").read_text() + "virtual:\n  subnet: 10.1.0.0/24\n"
    cluster = load_text(text, str(tmp_path / "cluster.yaml"))
    with pytest.raises(UsageError, match="the virtual cluster cannot run Kubernetes"):
        converge(cluster, "apply")
    with pytest.raises(UsageError, match="the virtual cluster runs Slurm only"):
        VirtualCluster(cluster)
    assert not (tmp_path / ".corral").exists()  # nothing started, nothing written
