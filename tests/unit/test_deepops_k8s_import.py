"""`corral import deepops` of a Kubernetes (Kubespray) inventory: the control-plane and worker groups,
and Kubespray's settings carried into `kubernetes:` (importers/deepops_k8s.py) or named when they cannot be."""

from __future__ import annotations

from corral.importers.deepops import import_deepops
from corral.spec.loader import load_text
from tests.unit.test_deepops_import import K8S, by_name, carried_not


def test_k8s_fixture_converts_and_loads():
    result = import_deepops(K8S)
    cluster = load_text(result.yaml_text)
    assert cluster.spec.scheduler == "kubernetes"
    assert cluster.name == "k8s"  # config/ is named after the directory that holds it
    nodes = by_name(cluster)
    assert {n: nodes[n].roles for n in nodes} == {
        "mgmt01": ("control-plane",), "mgmt02": ("control-plane",), "mgmt03": ("control-plane",),
        "gpu01": ("worker",), "gpu02": ("worker",), "gpu03": ("worker",)}
    assert nodes["gpu03"].address == "10.1.1.13"
    assert (cluster.spec.ssh.user, cluster.spec.ssh.port) == ("admin", 2222)
    assert cluster.spec.slurm.partitions == []
    assert "names: \"mgmt[01-03]\"" in result.yaml_text
    assert carried_not(result, "[etcd] — corral runs etcd co-located with the control plane")
    assert carried_not(result, "inventory:41: ansible_become")
    assert carried_not(result, "group_vars/k8s_cluster.yml:8: k8s_nfs_client_provisioner — ")
    assert cluster.spec.kubernetes.version == "1.30.4"  # kube_version v1.30.4
    assert cluster.spec.kubernetes.gpu_operator.mig_strategy == "mixed"  # k8s_gpu_mig_strategy
    assert carried_not(result, "chrony_config_server — corral's time-sync component takes no server list")
    assert carried_not(result, "gpus (gpu[01-03]) — declare gpus: per group")
    assert not carried_not(result, "slurm_cluster_name")  # Kubernetes import: no Slurm name note


# --- mapping details --------------------------------------------------------------------------


def test_kubespray_values_that_cannot_be_carried_are_named(tmp_path):
    cfg = tmp_path / "config"
    (cfg / "group_vars").mkdir(parents=True)
    (cfg / "inventory").write_text("[all]\ncp ansible_host=10.9.0.1\nw1 ansible_host=10.9.0.11\n"
                                   "[kube_control_plane]\ncp\n[kube_node]\nw1\n")
    (cfg / "group_vars" / "all.yml").write_text(
        "kube_version: v1.26.3\nkube_network_plugin: flannel\nkube_pods_subnet: '{{ my_subnet }}'\n"
        "kube_service_addresses: 10.233.0.0/33\nk8s_gpu_mig_strategy: both\nkube_vip_address: 10.9.0.5\n")
    result = import_deepops(cfg)
    cluster = load_text(result.yaml_text)
    assert cluster.spec.kubernetes.version == "1.31.4" and cluster.spec.kubernetes.cni.plugin == "calico"
    for needle in ("kube_version — 'v1.26.3': corral renders Kubernetes 1.28 and later",
                   "kube_network_plugin — 'flannel': corral installs calico or cilium",
                   "kube_pods_subnet — a Jinja template ('{{ my_subnet }}'), not evaluated",
                   "kube_service_addresses — '10.233.0.0/33' is not an IPv4 network",
                   "k8s_gpu_mig_strategy — 'both' is not none, single or mixed",
                   "kube_vip_address — no usable kube_vip_interface"):
        assert carried_not(result, needle), needle
