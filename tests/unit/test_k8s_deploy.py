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
from corral.deploy import operations  # noqa: E402
from corral.deploy.nodestate import Snapshot  # noqa: E402
from corral.engine import notes  # noqa: E402
from corral.render.kubernetes import node_files  # noqa: E402
from corral.spec.loader import load  # noqa: E402

OPS = {operations: ("managed_file", "run_when_changed", "package_install", "service", "restart"),
       kdeploy: ("swap_off", "tools_held", "kubeadm_init", "join_pending", "pinned_key")}
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
    return calls


def _state(cluster, node, joined: bool) -> tuple[Snapshot, dict]:
    files = {path: {"kind": "file", "mode": MODES.get(path, "644"), "user": "root", "group": "root",
                    "sha256": hashlib.sha256(text.encode()).hexdigest()}
             for path, text in node_files(cluster, node).items()} if joined else {}
    if joined:
        files[kdeploy.KEY] = {"kind": "file", "mode": "644", "user": "root", "group": "root", "sha256": "0" * 64}
        files[kdeploy.SOURCE] = {"kind": "file", "mode": "644", "user": "root", "group": "root",
                                 "sha256": hashlib.sha256(kdeploy.source(cluster.spec.kubernetes.version).encode()).hexdigest()}
        files[kdeploy.PIN] = {"kind": "file", "mode": "644", "user": "root", "group": "root",
                              "sha256": hashlib.sha256(kdeploy.pin(cluster.spec.kubernetes.version).encode()).hexdigest()}
        files[kdeploy.KUBELET_CONF] = files[kdeploy.KEY]  # every node of a cluster has joined (or inited)
        if "control-plane" in node.roles:
            files[kdeploy.ADMIN_CONF] = files[kdeploy.KEY]
    tools = {t: "1.31.4-1.1" for t in kdeploy.TOOLS}
    snap = Snapshot(files=files, services={"containerd": ("active", "enabled")} if joined else {},
                    packages={"containerd": "1.6.20~ds1-1", **tools} if joined else {}, blocks={},
                    apt_lists_age_s=60, container="none")
    facts = {"FileContents": {"/proc/swaps": ["Filename Type Size Used Priority"],
                              "/etc/fstab": ["UUID=1 / ext4 defaults 0 1"]},
             "AptHolds": {" ".join(kdeploy.TOOLS): [list(kdeploy.TOOLS), [], list(kdeploy.TOOLS)] if joined else [[], [], []]}}
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
    assert names["cp1"][-2:] == ["kube-vip", "kubeadm init"] and "join pending" not in names["cp1"]
    assert names["cp2"][-3:] == ["kube-vip", kdeploy.JOIN_SCRIPT, "join pending"]
