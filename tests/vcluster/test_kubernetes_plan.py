"""`corral plan` of a Kubernetes spec against real Debian nodes (the shared cluster's, under a spec of
their own): every fact the Kubernetes deploys read (the node snapshot, apt holds, /proc/swaps and fstab,
the cluster fact on the control-plane node) is read and parsed on real systemd nodes, and the plan is
what a fresh Kubernetes cluster needs: kubeadm init on the control-plane node, a pending join on each
worker, Helm and its releases from the control-plane node. Nothing is changed and nothing is fetched (a
plan only reads), and no Kubernetes binary runs here: see docs/components/kubernetes.md. Its own state
dir (the shared cluster's pinned host keys copied), so the shared cluster's journal is not touched."""

from __future__ import annotations

import json
import shutil

import pytest

from corral.cli.main import main
from corral.engine.journal import journal_path
from tests.vcluster.conftest import ssh

pytestmark = pytest.mark.vcluster


@pytest.fixture(scope="module")
def kube_spec(shared_cluster, tmp_path_factory):
    c = shared_cluster.cluster
    here = tmp_path_factory.mktemp("kube-plan")
    (here / ".corral").mkdir()
    shutil.copy(c.state_dir / "known_hosts", here / ".corral" / "known_hosts")
    addr = {n.name: n.address for n in c.nodes}
    spec = here / "kube.yaml"
    spec.write_text(f"""name: kplan
scheduler: kubernetes
ssh: {{user: root, key: {c.ssh_key()}, port: {c.spec.ssh.port}}}
nodes:
  - {{names: ctl, addresses: [{addr['ctl']}], roles: [control-plane]}}
  - {{names: "gpu[01-02]", addresses: [{addr['gpu01']}, {addr['gpu02']}], roles: [worker], gpus: {{model: h100, count: 4}}}}
kubernetes: {{version: 1.31.4}}
nvidia: {{driver: {{version: 550.127.05}}}}
""")
    return spec


def test_the_plan_of_a_fresh_kubernetes_cluster_on_real_nodes(shared_cluster, kube_spec, capsys):
    journal = journal_path(shared_cluster.cluster.state_dir)
    before = journal.read_bytes() if journal.exists() else None  # none when this module runs alone
    rc = main(["plan", "-f", str(kube_spec), "--json"])
    data = json.loads(capsys.readouterr().out)
    assert rc == 0 and data["ok"], json.dumps(data, indent=1)[:4000]
    ops = {n: {o["name"]: o for o in node["ops"]} for n, node in data["nodes"].items()}
    ctl, gpu = ops["ctl"], ops["gpu01"]
    assert ctl["kubernetes node | kubeadm init"]["status"] == "changed"
    assert "kubernetes node | join pending" not in ctl
    join = gpu["kubernetes node | join pending"]
    assert join["status"] == "changed" and join["disruption"] == "join the cluster"
    assert "a 15-minute token from ctl" in join["diff"] and "kubeadm init" not in " ".join(gpu)
    # the facts of real nodes: no Kubernetes tools yet, so no upgrade; the cluster is down, nothing to label
    assert gpu["kubernetes node | Kubernetes version"]["status"] == "unchanged"
    assert ctl["kubernetes cluster | node labels"]["reason"] == "the cluster is not up yet: labels after init"
    releases = [n for n in ctl if n.startswith("kubernetes cluster | helm release")]
    assert releases[0] == "kubernetes cluster | helm release calico" and releases[-1].endswith("gpu-operator")
    assert all(ctl[n]["disruption"] == "none (a new release)" for n in releases)
    assert "DDF78C3E6EBB2D2CC223C95C62BA89D07698DBC6" in ctl["kubernetes cluster | Helm signing key"]["diff"]
    assert "DE15B14486CD377B9E876E1A234654DA9A296436" in gpu["kubernetes node | Kubernetes signing key"]["diff"]
    assert gpu["kubernetes cluster | Helm releases"]["reason"] == "skipped: applied from ctl"
    assert any("not yet run against a live cluster" in w for w in data["warnings"])
    # a plan changes nothing on the nodes, and the shared cluster's own journal is untouched
    assert ssh(shared_cluster, "gpu01", "test -e /etc/kubernetes || test -e /etc/apt/keyrings/kubernetes-apt-keyring.gpg",
               check=False).returncode == 1
    assert (journal.read_bytes() if journal.exists() else None) == before and journal_path(kube_spec.parent / ".corral").exists()
