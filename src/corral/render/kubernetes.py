"""What a Kubernetes node gets (pure; scheduler: kubernetes, docs/components/kubernetes.md): kubeadm's
configuration (InitConfiguration + ClusterConfiguration + KubeletConfiguration on the first control-plane
node, a JoinConfiguration on the others), containerd's config, the kernel modules and sysctls the
kubelet needs, and kube-vip's static pod on HA control-plane nodes. Join tokens and the certificate key
are created at join time with a short TTL and never written here: the files name where they come from.
The GPU Operator's values are in render/gpu_operator.py."""

from __future__ import annotations

import io

from ruamel.yaml import YAML

from corral.spec.cluster import Cluster, Node

KUBE_VIP_IMAGE = "ghcr.io/kube-vip/kube-vip:v0.8.7"
PAUSE_IMAGE = "registry.k8s.io/pause:3.10"
CRI_SOCKET = "unix:///run/containerd/containerd.sock"
# placeholders in a joining node's JoinConfiguration, filled by corral-kubeadm-join (join_script) in a private
# temporary copy: the token (15 minutes) and certificate key are made at join time and never written to disk
JOIN_TOKEN, CA_HASH, CERT_KEY = "@JOIN_TOKEN@", "@CA_HASH@", "@CERT_KEY@"
JOIN_SCRIPT = "/usr/local/sbin/corral-kubeadm-join"
KUBEADM_CONFIG = "/etc/kubernetes/corral-kubeadm.yaml"
MODULES = "# Managed by corral: what the kubelet and the pod network need\noverlay\nbr_netfilter\n"
SYSCTL = ("# Managed by corral: Kubernetes networking\nnet.bridge.bridge-nf-call-iptables = 1\n"
          "net.bridge.bridge-nf-call-ip6tables = 1\nnet.ipv4.ip_forward = 1\n")


def yaml_text(*docs: dict) -> str:
    """YAML documents in the order their keys were written (apiVersion and kind first)."""
    y = YAML()
    y.default_flow_style = False
    y.width = 4096  # one line per value
    y.indent(mapping=2, sequence=4, offset=2)
    out = io.StringIO()
    y.dump_all(list(docs), out)
    return out.getvalue()


def _beta4(cluster: Cluster) -> bool:
    """kubeadm's v1beta4 configuration API from Kubernetes 1.31 on (v1beta3 before)."""
    return int(cluster.spec.kubernetes.version.split(".")[1]) >= 31


def _args(cluster: Cluster, args: dict[str, str]):
    """Extra arguments as the API version wants them: a list of name/value (v1beta4) or a map (v1beta3)."""
    return [{"name": k, "value": v} for k, v in args.items()] if _beta4(cluster) else dict(args)


def endpoint(cluster: Cluster) -> str:
    """host:port of the API server: the HA virtual IP, else the first control-plane node's address."""
    ep = cluster.spec.kubernetes.control_plane_endpoint
    if ep is not None:
        return f"{ep.address}:{ep.port}"
    return f"{cluster.with_role('control-plane')[0].address}:6443"


def first_control_plane(cluster: Cluster) -> Node:
    return cluster.with_role("control-plane")[0]


def _api(cluster: Cluster) -> str:
    return "kubeadm.k8s.io/v1beta4" if _beta4(cluster) else "kubeadm.k8s.io/v1beta3"


def _registration(cluster: Cluster, node: Node) -> dict:
    from corral.render.gpu_operator import node_settings
    reg = {"name": node.name, "criSocket": CRI_SOCKET,
           "kubeletExtraArgs": _args(cluster, {"node-ip": node.address})}
    spec_taints = [{"key": t.key, **({"value": t.value} if t.value else {}), "effect": t.effect}
                   for t in node_settings(cluster).get(node.name, ({}, []))[1]]
    if "control-plane" in node.roles and "worker" not in node.roles:
        reg["taints"] = [{"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}, *spec_taints]
    elif "control-plane" in node.roles or spec_taints:
        reg["taints"] = spec_taints  # a control-plane node that is also a worker takes pods (unless tainted)
    return reg


def cluster_configuration(cluster: Cluster) -> dict:
    k = cluster.spec.kubernetes
    cps = cluster.with_role("control-plane")
    sans = ([str(k.control_plane_endpoint.address)] if k.control_plane_endpoint else []) + \
        [n.address for n in cps] + [n.name for n in cps]
    return {"apiVersion": _api(cluster), "kind": "ClusterConfiguration", "clusterName": cluster.name,
            "kubernetesVersion": f"v{k.version}", "controlPlaneEndpoint": endpoint(cluster),
            "networking": {"podSubnet": str(k.pod_cidr), "serviceSubnet": str(k.service_cidr),
                           "dnsDomain": "cluster.local"},
            "apiServer": {"certSANs": sans}}


def kubelet_configuration() -> dict:
    return {"apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration", "cgroupDriver": "systemd",
            "serverTLSBootstrap": True}


def kubeadm_config(cluster: Cluster, node: Node) -> str:
    """/etc/kubernetes/corral-kubeadm.yaml: `kubeadm init --config` on the first control-plane node,
    `kubeadm join --config` on the others (their token, CA hash and certificate key filled in at join time)."""
    head = "# Managed by corral: kubeadm's configuration for this node (docs/components/kubernetes.md)\n"
    if node.name != first_control_plane(cluster).name:
        head += (f"# {JOIN_TOKEN}, {CA_HASH} and {CERT_KEY} are filled in at join time by {JOIN_SCRIPT}, in a\n"
                 "# private temporary copy: the token lives 15 minutes and is never stored\n")
    if node.name == first_control_plane(cluster).name:
        init = {"apiVersion": _api(cluster), "kind": "InitConfiguration",
                "localAPIEndpoint": {"advertiseAddress": node.address, "bindPort": 6443},
                "nodeRegistration": _registration(cluster, node)}
        return head + yaml_text(init, cluster_configuration(cluster), kubelet_configuration())
    join = {"apiVersion": _api(cluster), "kind": "JoinConfiguration",
            "discovery": {"bootstrapToken": {"apiServerEndpoint": endpoint(cluster), "token": JOIN_TOKEN,
                                             "caCertHashes": [CA_HASH]}},
            "nodeRegistration": _registration(cluster, node)}
    if "control-plane" in node.roles:
        join["controlPlane"] = {"localAPIEndpoint": {"advertiseAddress": node.address, "bindPort": 6443},
                                "certificateKey": CERT_KEY}
    return head + yaml_text(join)


def join_script() -> str:
    """/usr/local/sbin/corral-kubeadm-join (0700): joins this node with the token, the CA's hash and (a
    control-plane node) the certificate key read from stdin, one per line: they are on no command line and
    in no file but a private temporary copy of the JoinConfiguration, removed when kubeadm is done. A failed
    join is undone with `kubeadm reset -f`, so no half-joined node stays."""
    return rf"""#!/bin/sh
# Managed by corral: join this node to the Kubernetes cluster (docs/components/kubernetes.md)
set -u
if [ -e /etc/kubernetes/kubelet.conf ]; then echo "already joined (/etc/kubernetes/kubelet.conf)"; exit 0; fi
IFS= read -r token || token=
IFS= read -r ca || ca=
IFS= read -r key || key=
bad() {{ echo "corral-kubeadm-join: $1" >&2; exit 2; }}
printf '%s\n' "$token" | grep -Eqx '[a-z0-9]{{6}}\.[a-z0-9]{{16}}' || bad "no valid join token on stdin"
printf '%s\n' "$ca" | grep -Eqx 'sha256:[0-9a-f]{{64}}' || bad "no valid CA hash on stdin"
[ -z "$key" ] || printf '%s\n' "$key" | grep -Eqx '[0-9a-f]{{64}}' || bad "the certificate key is not 64 hex digits"
if grep -q 'certificateKey:' {KUBEADM_CONFIG} && [ -z "$key" ]; then bad "a control-plane join needs the certificate key"; fi
umask 077
tmp=$(mktemp /etc/kubernetes/.corral-join.XXXXXX) || exit 1
trap 'rm -f "$tmp"' EXIT
sed -e "s/{JOIN_TOKEN}/$token/" -e "s/{CA_HASH}/$ca/" -e "s/{CERT_KEY}/$key/" {KUBEADM_CONFIG} > "$tmp" || exit 1
timeout 600 kubeadm join --config "$tmp"
rc=$?
if [ "$rc" -ne 0 ]; then
  echo "kubeadm join failed (exit $rc): kubeadm reset -f, so that nothing half-joined stays" >&2
  timeout 120 kubeadm reset -f >&2 || true
fi
exit "$rc"
"""


def containerd_config() -> str:
    """/etc/containerd/config.toml: the systemd cgroup driver (as the kubelet's) and the pause image kubeadm
    pulls; the NVIDIA runtime is added by the GPU Operator's toolkit on GPU workers."""
    return ("# Managed by corral: containerd for the kubelet (the GPU Operator adds the NVIDIA runtime)\n"
            "version = 2\n\n[plugins.\"io.containerd.grpc.v1.cri\"]\n"
            f"  sandbox_image = \"{PAUSE_IMAGE}\"\n\n"
            "[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.runc]\n  runtime_type = \"io.containerd.runc.v2\"\n\n"
            "[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.runc.options]\n  SystemdCgroup = true\n")


def kube_vip_manifest(cluster: Cluster, first: bool = False) -> str | None:
    """/etc/kubernetes/manifests/kube-vip.yaml on HA control-plane nodes (None: no virtual IP). On the first
    node from Kubernetes 1.29 on it reads super-admin.conf: while `kubeadm init` runs, admin.conf has no
    rights yet, and kube-vip must hold the virtual IP for init to reach the API server through it."""
    ep = cluster.spec.kubernetes.control_plane_endpoint
    if ep is None:
        return None
    kubeconfig = "/etc/kubernetes/super-admin.conf" if first and int(
        cluster.spec.kubernetes.version.split(".")[1]) >= 29 else "/etc/kubernetes/admin.conf"
    env = {"vip_arp": "true", "port": str(ep.port), "vip_interface": ep.interface, "vip_cidr": "32",
           "cp_enable": "true", "cp_namespace": "kube-system", "vip_leaderelection": "true",
           "vip_leasename": "plndr-cp-lock", "vip_leaseduration": "5", "vip_renewdeadline": "3",
           "vip_retryperiod": "1", "address": str(ep.address)}
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "kube-vip", "namespace": "kube-system"},
           "spec": {"hostNetwork": True,
                    "hostAliases": [{"ip": "127.0.0.1", "hostnames": ["kubernetes"]}],
                    "containers": [{"name": "kube-vip", "image": KUBE_VIP_IMAGE, "imagePullPolicy": "IfNotPresent",
                                    "args": ["manager"], "env": [{"name": k, "value": v} for k, v in env.items()],
                                    "securityContext": {"capabilities": {"add": ["NET_ADMIN", "NET_RAW"]}},
                                    "volumeMounts": [{"mountPath": "/etc/kubernetes/admin.conf", "name": "kubeconfig"}]}],
                    "volumes": [{"name": "kubeconfig", "hostPath": {"path": kubeconfig, "type": "FileOrCreate"}}]}}
    return "# Managed by corral: kube-vip holds the API server's virtual IP\n" + yaml_text(pod)


def node_files(cluster: Cluster, node: Node) -> dict[str, str]:
    """path -> content of every file corral installs on this Kubernetes node."""
    files = {"/etc/modules-load.d/corral-kubernetes.conf": MODULES,
             "/etc/sysctl.d/90-corral-kubernetes.conf": SYSCTL,
             "/etc/containerd/config.toml": containerd_config()}
    if "control-plane" in node.roles or "worker" in node.roles:
        files[KUBEADM_CONFIG] = kubeadm_config(cluster, node)
        if node.name != first_control_plane(cluster).name:
            files[JOIN_SCRIPT] = join_script()
    vip = kube_vip_manifest(cluster, first=node.name == first_control_plane(cluster).name)
    if vip is not None and "control-plane" in node.roles:
        files["/etc/kubernetes/manifests/kube-vip.yaml"] = vip
    return files
