"""The Kubernetes path, offline (issue: no Kubernetes binaries can run here): the spec's rules as located
errors, every rendered file against its golden copy (tests/golden/kubernetes/<case>/: cluster.yaml and the
tree `corral render` writes), every Kubernetes object validated against the OpenAPI schema of the pinned
version (kubernetes-validate), kubeadm's configuration checked field by field for its API version, and
doctor saying the path has not run against a live cluster.

Rewrite the golden trees after a deliberate change with
CORRAL_UPDATE_GOLDEN=1 .venv/bin/python -m pytest tests/unit/test_kubernetes_render.py
and review the diff."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from corral.errors import CorralError
from corral.spec.loader import load, load_text
from corral.workflows.render_files import render

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "kubernetes"
UPDATE = os.environ.get("CORRAL_UPDATE_GOLDEN") == "1"
BASE = """name: k
ssh: {user: root}
scheduler: kubernetes
nodes:
  - {names: "cp[1-3]", addresses: "10.0.0.[10-12]", roles: [control-plane]}
  - {names: "gpu[01-02]", addresses: "10.0.0.[21-22]", roles: [worker], gpus: {model: h100, count: 8}}
nvidia: {driver: {version: 550.127.05}}
"""
VIP = "kubernetes:\n  control_plane_endpoint: {address: 10.0.0.5, interface: eth0}\n"


def docs(text: str) -> list[dict]:
    return [d for d in YAML(typ="safe").load_all(text) if d is not None]


@pytest.mark.parametrize("case", ["single", "ha"])
def test_golden_trees(case, tmp_path):
    cluster = load(GOLDEN / case / "cluster.yaml")
    out = tmp_path / "out"
    render(cluster, out)
    got = {str(p.relative_to(out)): p.read_text() for p in sorted(out.rglob("*")) if p.is_file()}
    want_dir = GOLDEN / case / "tree"
    if UPDATE:
        shutil.rmtree(want_dir, ignore_errors=True)
        shutil.copytree(out, want_dir)
    want = {str(p.relative_to(want_dir)): p.read_text() for p in sorted(want_dir.rglob("*")) if p.is_file()}
    assert sorted(got) == sorted(want), "the rendered files differ from the golden tree's: CORRAL_UPDATE_GOLDEN=1"
    for name in got:
        assert got[name] == want[name], f"{case}/tree/{name} differs from its golden file"


@pytest.mark.parametrize("case", ["single", "ha"])
def test_every_kubernetes_object_validates_against_the_pinned_version(case):
    kubernetes_validate = pytest.importorskip("kubernetes_validate")
    cluster = load(GOLDEN / case / "cluster.yaml")
    version = cluster.spec.kubernetes.version
    tree = GOLDEN / case / "tree"
    objects = [d for p in sorted(tree.rglob("*.yaml")) for d in docs(p.read_text())
               if d.get("apiVersion") in ("v1", "apps/v1")]
    assert objects, "no Kubernetes object rendered"
    for obj in objects:
        kubernetes_validate.validate(obj, version, strict=True)  # raises on an unknown field or a wrong type
    bad = dict(objects[0], spec={"containers": [{"name": "x", "image": "y", "bogus": True}]})
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(bad, version, strict=True)


def test_kubeadm_configuration_follows_its_api_version():
    single, ha = (load(GOLDEN / c / "cluster.yaml") for c in ("single", "ha"))
    init = docs((GOLDEN / "single/tree/cp1/etc/kubernetes/corral-kubeadm.yaml").read_text())
    assert [(d["apiVersion"], d["kind"]) for d in init] == [
        ("kubeadm.k8s.io/v1beta3", "InitConfiguration"), ("kubeadm.k8s.io/v1beta3", "ClusterConfiguration"),
        ("kubelet.config.k8s.io/v1beta1", "KubeletConfiguration")]
    assert init[0]["nodeRegistration"]["kubeletExtraArgs"] == {"node-ip": "10.1.0.10"}  # v1beta3: a map
    assert init[1]["controlPlaneEndpoint"] == "10.1.0.10:6443" and init[1]["kubernetesVersion"] == "v1.30.8"
    assert init[1]["networking"] == {"podSubnet": "10.244.0.0/16", "serviceSubnet": "10.96.0.0/12",
                                     "dnsDomain": "cluster.local"}
    assert init[2]["cgroupDriver"] == "systemd"
    ha_init = docs((GOLDEN / "ha/tree/cp1/etc/kubernetes/corral-kubeadm.yaml").read_text())
    assert ha_init[0]["apiVersion"] == "kubeadm.k8s.io/v1beta4"
    assert ha_init[0]["nodeRegistration"]["kubeletExtraArgs"] == [{"name": "node-ip", "value": "10.0.0.10"}]
    assert ha_init[1]["controlPlaneEndpoint"] == "10.0.0.5:6443"
    assert ha_init[1]["apiServer"]["certSANs"][:2] == ["10.0.0.5", "10.0.0.10"]
    join = docs((GOLDEN / "ha/tree/cp2/etc/kubernetes/corral-kubeadm.yaml").read_text())[0]
    assert join["kind"] == "JoinConfiguration" and join["controlPlane"]["localAPIEndpoint"]["advertiseAddress"] == "10.0.0.11"
    worker = docs((GOLDEN / "ha/tree/gpu01/etc/kubernetes/corral-kubeadm.yaml").read_text())[0]
    assert "controlPlane" not in worker and worker["discovery"]["bootstrapToken"]["apiServerEndpoint"] == "10.0.0.5:6443"
    assert worker["discovery"]["bootstrapToken"]["token"] == "@JOIN_TOKEN@"  # never a real token: filled at join time
    assert single.spec.kubernetes.cni.pinned() == "1.16.5" and ha.spec.kubernetes.cni.pinned() == "3.29.1"
    # kube-vip: the first control-plane node reads super-admin.conf while kubeadm init runs (1.29+)
    first = docs((GOLDEN / "ha/tree/cp1/etc/kubernetes/manifests/kube-vip.yaml").read_text())[0]
    second = docs((GOLDEN / "ha/tree/cp2/etc/kubernetes/manifests/kube-vip.yaml").read_text())[0]
    assert first["spec"]["volumes"][0]["hostPath"]["path"] == "/etc/kubernetes/super-admin.conf"
    assert second["spec"]["volumes"][0]["hostPath"]["path"] == "/etc/kubernetes/admin.conf"
    assert not (GOLDEN / "single/tree/cp1/etc/kubernetes/manifests").exists()  # no virtual IP, no kube-vip


def test_gpu_operator_values_and_mig_layouts():
    single = docs((GOLDEN / "single/tree/cluster/gpu-operator-values.yaml").read_text())[0]
    assert single["driver"] == {"enabled": False} and single["mig"] == {"strategy": "single"}
    assert single["dcgmExporter"]["serviceMonitor"] == {"enabled": False}
    ha = docs((GOLDEN / "ha/tree/cluster/gpu-operator-values.yaml").read_text())[0]
    policy = ha["driver"].pop("upgradePolicy")  # the rollout policy, for the Operator's upgrade controller
    assert ha["driver"] == {"enabled": True, "version": "550.127.05"} and ha["mig"] == {"strategy": "mixed"}
    assert policy["autoUpgrade"] and policy["maxParallelUpgrades"] == 1 and policy["drain"]["enable"]
    assert policy["drain"]["timeoutSeconds"] == 3600  # rollout.drain_timeout
    assert ha["migManager"] == {"enabled": True, "config": {"name": "corral-mig-parted-config", "default": "all-disabled"}}
    labels = json.loads((GOLDEN / "ha/tree/cluster/node-labels.json").read_text())
    cm = docs((GOLDEN / "ha/tree/cluster/mig-parted-configmap.yaml").read_text())[0]
    config = docs(cm["data"]["config.yaml"])[0]
    layout = labels["gpu03"]["nvidia.com/mig.config"]
    assert config["mig-configs"][layout] == [{"devices": list(range(8)), "mig-enabled": True,
                                              "mig-devices": {"3g.40gb": 2}}]
    assert "nvidia.com/mig.config" not in labels["gpu01"] and "all-disabled" in config["mig-configs"]


@pytest.mark.parametrize(("extra", "words"), [
    ("kubernetes: {service_cidr: 10.240.0.0/12}\n", "the service network 10.240.0.0/12 overlaps the pod network"),
    ("kubernetes: {pod_cidr: 10.0.0.0/16}\n", "10.0.0.0/16 holds node addresses (cp1 10.0.0.10"),
    ("kubernetes: {version: 1.27.9}\n", "Kubernetes 1.27.9 is out of support"),
    ("kubernetes: {control_plane_endpoint: {address: 10.0.0.11, interface: eth0}}\n", "10.0.0.11 is cp2's address"),
    ("kubernetes: {control_plane_endpoint: {address: 10.9.0.5, interface: eth0}}\n", "not in the control-plane nodes' subnet"),
    ("kubernetes: {control_plane_endpoint: {address: 10.0.0.5, interface: 'eth0; reboot'}}\n", "interface"),
])
def test_bad_kubernetes_specs_are_located_errors(extra, words):
    with pytest.raises(CorralError, match="cluster.yaml:") as err:
        load_text(BASE + extra, "cluster.yaml")
    assert words in str(err.value)


def test_control_plane_counts_and_the_operator_driver():
    two = BASE.replace("cp[1-3]", "cp[1-2]").replace("10.0.0.[10-12]", "10.0.0.[10-11]")
    with pytest.raises(CorralError, match="two control-plane nodes: etcd needs a majority"):
        load_text(two, "cluster.yaml")
    one = BASE.replace("cp[1-3]", "cp1").replace('"10.0.0.[10-12]"', "[10.0.0.10]")
    with pytest.raises(CorralError, match="a virtual IP with 1 control-plane node"):
        load_text(one + VIP, "cluster.yaml")
    from corral.spec.rules import spec_warnings
    assert any("3 control-plane nodes and no control_plane_endpoint" in w
               for w in spec_warnings(load_text(BASE, "cluster.yaml")))
    unpinned = load_text(one.replace("nvidia: {driver: {version: 550.127.05}}\n", ""), "cluster.yaml")
    assert any("installs its chart's default driver, not pinned" in w for w in spec_warnings(unpinned))
    preinstalled = load_text(one.replace("nvidia: {driver: {version: 550.127.05}}\n", "")
                             + "kubernetes: {gpu_operator: {driver: {source: preinstalled}}}\n", "cluster.yaml")
    assert not any("default driver" in w for w in spec_warnings(preinstalled))
    mixed = one + ("  - {names: gpu09, addresses: [10.0.0.29], roles: [worker], gpus: {model: a100, count: 8, "
                   "mig: [{gpus: all, profiles: [3g.40gb, 2g.20gb]}]}}\n")
    mixed = mixed.replace("nvidia: {driver: {version: 550.127.05}}\n", "") + \
        "nvidia: {driver: {version: 550.127.05}}\nkubernetes: {gpu_operator: {mig_strategy: single}}\n"
    with pytest.raises(CorralError, match="gpu09: mig_strategy single exposes one kind of MIG device per node"):
        load_text(mixed, "cluster.yaml")
    with pytest.raises(CorralError, match="gpu09: mig_strategy single needs MIG on every GPU"):
        load_text(mixed.replace("gpus: all, profiles: [3g.40gb, 2g.20gb]", "gpus: 0-3, profiles: [3g.40gb]"),
                  "cluster.yaml")


def test_doctor_and_spec_check_say_the_path_has_not_run_live():
    from corral.checks.doctor import evaluate
    from corral.spec.rules import spec_warnings
    cluster = load(GOLDEN / "single" / "cluster.yaml")
    assert any("not yet run against a live cluster by corral's tests" in w for w in spec_warnings(cluster))
    spec_check = next(c for c in evaluate(cluster, {}, {}).checks if c.name == "spec")
    assert spec_check.status == "WARN" and "Kubernetes path: not yet run against a live cluster" in spec_check.message
    slurm = load_text(BASE.replace("scheduler: kubernetes", "scheduler: slurm").replace("cp[1-3]", "cp1")
                      .replace('"10.0.0.[10-12]"', "[10.0.0.10]").replace("control-plane", "controller")
                      .replace("worker", "compute"), "cluster.yaml")
    assert next(c for c in evaluate(slurm, {}, {}).checks if c.name == "spec").status == "OK"


def test_render_writes_one_node_or_refuses_an_unknown_one(tmp_path):
    cluster = load(GOLDEN / "ha" / "cluster.yaml")
    render(cluster, tmp_path / "one")
    done = render(cluster, tmp_path / "one", node="gpu03")  # the earlier render is replaced: no stale file
    assert list(done["files"]) == ["gpu03"] and not (tmp_path / "one" / "cluster").exists()
    assert sorted(p.name for p in (tmp_path / "one").iterdir()) == [".corral-render", "NOTES.txt", "gpu03"]
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "keep.txt").write_text("the user's")
    with pytest.raises(CorralError, match="is not empty and holds no earlier render"):
        render(cluster, mine)
    assert [p.name for p in mine.iterdir()] == ["keep.txt"]
    with pytest.raises(CorralError, match="--node gpu99: no such node"):
        render(cluster, tmp_path / "two", node="gpu99")


def test_kube_prometheus_stack_carries_corrals_gpu_rules_and_promtool_accepts_them(tmp_path):
    import subprocess
    from tests.unit.test_alert_rules import tool
    values = docs((GOLDEN / "ha/tree/cluster/kube-prometheus-stack-values.yaml").read_text())[0]
    assert values["prometheus"]["prometheusSpec"]["serviceMonitorSelectorNilUsesHelmValues"] is False
    groups = values["additionalPrometheusRulesMap"]["corral-gpu"]["groups"]
    assert [r["alert"] for r in groups[0]["rules"]] == ["GpuXidError", "GpuEccUncorrectable", "GpuTemperatureHigh"]
    assert all("$labels.Hostname" in r["annotations"]["summary"] for r in groups[0]["rules"])
    path = tmp_path / "corral-gpu.yml"
    path.write_text(json.dumps({"groups": groups}))
    out = subprocess.run([tool("promtool"), "check", "rules", str(path)], capture_output=True, text=True)
    assert out.returncode == 0 and "SUCCESS: 3 rules found" in out.stdout, out.stdout + out.stderr


def test_swap_lines_are_commented_by_the_real_sed_and_the_repository_follows_the_minor(tmp_path):
    """deploy/kubernetes.py: the fstab edit swap_off runs, on a copy (real sed); pkgs.k8s.io's one
    repository per minor release; the tools pinned at the spec's version."""
    import subprocess
    from corral.deploy import kubernetes as deploy_k8s
    fstab = tmp_path / "fstab"
    fstab.write_text("UUID=5d3e / ext4 errors=remount-ro 0 1\nUUID=8c1f none swap sw 0 0\n"
                     "/swapfile\tnone\tswap\tsw\t0\t0\n#/old none swap sw 0 0\n")
    subprocess.run(["sed", "-i", "-E", deploy_k8s.FSTAB_SED, str(fstab)], check=True)
    lines = fstab.read_text().splitlines()
    assert lines == ["UUID=5d3e / ext4 errors=remount-ro 0 1",
                     "# corral: the kubelet needs swap off: UUID=8c1f none swap sw 0 0",
                     "# corral: the kubelet needs swap off: /swapfile\tnone\tswap\tsw\t0\t0", "#/old none swap sw 0 0"]
    assert deploy_k8s._swap_lines(lines) == []
    assert deploy_k8s.repo_url("1.31.4") == "https://pkgs.k8s.io/core:/stable:/v1.31/deb/"
    assert deploy_k8s.source("1.30.8").endswith(
        "deb [signed-by=/etc/apt/keyrings/kubernetes-apt-keyring.gpg] https://pkgs.k8s.io/core:/stable:/v1.30/deb/ /\n")
    assert "Package: kubeadm kubelet kubectl\nPin: version 1.31.4-*\nPin-Priority: 1001" in deploy_k8s.pin("1.31.4")


def test_the_operators_driver_upgrades_follow_the_rollout_policy():
    from corral.render.gpu_operator import upgrade_policy
    c = load_text((GOLDEN / "ha" / "cluster.yaml").read_text() + "rollout: {batch: 2, drain_timeout: 600}\n",
                  "cluster.yaml")
    assert upgrade_policy(c) == {"autoUpgrade": True, "maxParallelUpgrades": 2, "maxUnavailable": "2",
                                 "podDeletion": {"timeoutSeconds": 600, "deleteEmptyDir": True},
                                 "drain": {"enable": True, "timeoutSeconds": 600, "deleteEmptyDir": True}}


@pytest.mark.parametrize("nodes, error", [
    ("[{names: gpu09, labels: {team: x}}]", "cluster.yaml:8:30: not nodes of this spec: gpu09"),
    ("[{names: gpu01, labels: {node-role.kubernetes.io/gpu: x}}]", "is corral's or Kubernetes' own label"),
    ("[{names: gpu01, labels: {node.kubernetes.io/exclude: x}}]", "is corral's or Kubernetes' own label"),
    ("[{names: gpu01, labels: {nvidia.com/mig.config: x}}]", "is corral's or Kubernetes' own label"),
    ("[{names: gpu01, labels: {'team;rm -rf /': x}}]", "kubernetes.nodes.0.labels"),
    ("[{names: gpu01, labels: {team: 'a b'}}]", "kubernetes.nodes.0.labels"),
    ("[{names: gpu01, taints: [{key: dedicated, effect: Evict}]}]", "kubernetes.nodes.0.taints.0.effect"),
    ("[{names: gpu01, taints: [{key: dedicated, value: 'x:NoExecute'}]}]", "kubernetes.nodes.0.taints.0.value"),
])
def test_labels_and_taints_are_checked_where_they_stand(nodes, error):
    with pytest.raises(CorralError, match=error.replace(".", r"\.").replace("(", r"\(")):
        load_text(BASE + f"kubernetes: {{nodes: {nodes}}}\n", "cluster.yaml")
