"""Kubernetes nodes (scheduler: kubernetes; docs/components/kubernetes.md). This slice: every node's
prerequisites (kernel modules, sysctls, swap off, containerd with its config), the Kubernetes apt
repository (pkgs.k8s.io, its key pinned by fingerprint), kubeadm, kubelet and kubectl pinned to the
spec's version and held, kubeadm's configuration, kube-vip on HA control-plane nodes, `kubeadm init` on
the first control-plane node, and on the others the join script and a "join pending" change that
workflows/k8s_join.py carries out after the run with a 15-minute token. Every operation here is proven
by operation tests (tests/operations/k8s_*), not against a live cluster."""

from __future__ import annotations

from debian.debian_support import Version
from pyinfra import host
from pyinfra.api import deploy, operation
from pyinfra.facts.files import FileContents

from corral.components.kubernetes import TOOLS
from corral.deploy import operations
from corral.deploy.apt_keys import pinned_key
from corral.deploy.nodestate import Want, snapshot
from corral.engine.handoff import K8S_JOIN, KUBERNETES, Handoff
from corral.engine.notes import annotate
from corral.engine.shell import cmd, q, sh
from corral.facts.apt_upgrades import AptHolds
from corral.facts.kubernetes import ADMIN_CONF
from corral.facts.slurm import upstream_version
from corral.render import kubernetes as k8s

KEY = "/etc/apt/keyrings/kubernetes-apt-keyring.gpg"
SOURCE = "/etc/apt/sources.list.d/kubernetes.list"
PIN = "/etc/apt/preferences.d/corral-kubernetes"
KUBELET_CONF = "/etc/kubernetes/kubelet.conf"
CONFIG, JOIN_SCRIPT = k8s.KUBEADM_CONFIG, k8s.JOIN_SCRIPT
KUBE_VIP = "/etc/kubernetes/manifests/kube-vip.yaml"
JOIN = "join the cluster"  # the disruption label of a pending join (workflows/k8s_join.py)
UPGRADE = "drain + Kubernetes upgrade"  # a node at another version (workflows/k8s_upgrade.py)
MODULES, SYSCTL = "/etc/modules-load.d/corral-kubernetes.conf", "/etc/sysctl.d/90-corral-kubernetes.conf"
CONTAINERD = "/etc/containerd/config.toml"
# isv:kubernetes OBS Project <isv:kubernetes@build.opensuse.org>: signs every pkgs.k8s.io core:/stable: repository
K8S_KEY_FINGERPRINT = "DE15B14486CD377B9E876E1A234654DA9A296436"
# an active fstab line of type swap (device, mount point, `swap`, ...) -> commented, saying why
FSTAB_SED = (r"s|^([^#[:space:]][^[:space:]]*[[:space:]]+[^[:space:]]+[[:space:]]+swap[[:space:]].*)$|"
             r"# corral: the kubelet needs swap off: \1|")
# not registered with every node's snapshot (deploy/nodestate.py): Slurm runs do not read these paths
WANT = Want(paths=(KEY, SOURCE, PIN, ADMIN_CONF, KUBELET_CONF, CONFIG, JOIN_SCRIPT, KUBE_VIP, MODULES, SYSCTL,
                   CONTAINERD),
            services=("containerd", "kubelet"), packages=("containerd", *TOOLS))


def repo_url(version: str) -> str:
    """pkgs.k8s.io has one repository per minor release: 1.31.4 -> .../core:/stable:/v1.31/deb/."""
    return f"https://pkgs.k8s.io/core:/stable:/v{'.'.join(version.split('.')[:2])}/deb/"


def source(version: str) -> str:
    return f"# Managed by corral: Kubernetes {version}\ndeb [signed-by={KEY}] {repo_url(version)} /\n"


def pin(version: str) -> str:
    return (f"# Managed by corral: the Kubernetes tools stay at {version} until the spec changes it\n"
            f"Package: {' '.join(TOOLS)}\nPin: version {version}-*\nPin-Priority: 1001\n")


def _swap_lines(fstab: list[str]) -> list[str]:
    return [line for line in fstab if line.strip() and not line.lstrip().startswith("#")
            and len(line.split()) >= 3 and line.split()[2] == "swap"]


@operation()
def swap_off(want: Want):
    """The kubelet refuses to start with swap on: turn it off now and comment the fstab's swap lines."""
    active = [line for line in (host.get_fact(FileContents, path="/proc/swaps") or [])[1:] if line.strip()]
    fstab = _swap_lines(host.get_fact(FileContents, path="/etc/fstab") or [])
    if not active and not fstab:
        host.noop("swap is off (the kubelet needs it off)")
        return
    annotate(disruption="none", diff="".join(f"swap off: {line.split()[0]}\n" for line in active)
             + "".join(f"/etc/fstab: comment out {line.split()[0]}\n" for line in fstab))
    if active:
        yield cmd("swapoff", "-a")
    if fstab:
        yield cmd("sed", "-i", "-E", FSTAB_SED, "/etc/fstab")


@operation()
def tools_held(want: Want):
    """kubeadm, kubelet and kubectl held (apt-mark): an upgrade moves them only through corral."""
    held, _, installed = host.get_fact(AptHolds, names=" ".join(TOOLS))
    todo = [t for t in TOOLS if t in installed and t not in held]
    if not todo:
        host.noop(f"held: {', '.join(t for t in TOOLS if t in held) or 'none installed yet'}")
        return
    annotate(disruption="none", diff="".join(f"hold {t}\n" for t in todo))
    yield cmd("apt-mark", "hold", *todo)


def _minor(version: str) -> tuple[int, int]:
    major, minor = version.split(".")[:2]
    return int(major), int(minor)


@operation()
def version_pending(version: str, want: Want):
    """Installed tools at another version than the spec's: a change labelled UPGRADE, carried out after the run
    by workflows/k8s_upgrade.py (control plane first, then the workers under the rollout policy). Its command
    checks that the repository has the version (apt-cache madison), so nothing is drained for a version
    that cannot be installed. kubeadm's rules are kept: one minor release at a time, never down."""
    packages = snapshot(want).packages
    have = sorted({upstream_version(packages[t]) for t in TOOLS if t in packages})  # 1.31.4-1.1 -> 1.31.4
    if not have or have == [version]:
        host.noop(f"Kubernetes {version}" if have else "the Kubernetes tools are installed by this run")
        return
    oldest, newest = min(have, key=Version), max(have, key=Version)
    (m0, n0), (m1, n1) = _minor(oldest), _minor(version)
    downgrade = Version(version) < Version(newest)
    if downgrade or (m1 == m0 and n1 - n0 > 1):
        from corral.errors import CorralError
        why = "a downgrade" if downgrade else "more than one minor release"
        raise CorralError(f"refusing the Kubernetes upgrade {oldest} -> {version}: {why} (kubeadm upgrades one minor "
                          "release at a time, never down)", value=version,
                          fix=f"set kubernetes.version to a {m0}.{n0 + 1} release first (or back to {oldest})")
    annotate(disruption=UPGRADE, diff=f"kubeadm, kubelet, kubectl {', '.join(have)} -> {version}: after this run, "
                                      "control plane first, then the workers under the rollout policy\n",
             rollout=Handoff(KUBERNETES, oldest, version))
    yield sh(f"apt-cache madison kubeadm | grep -q {q(' ' + version + '-')} || "
             f"{{ echo {q('kubeadm ' + version + ' is not in the configured repositories')} >&2; exit 1; }}")


@operation()
def kubeadm_init(config: str, want: Want):
    """`kubeadm init` once, on the first control-plane node: admin.conf says the cluster exists."""
    if (snapshot(want).files.get(ADMIN_CONF) or {}).get("kind") == "file":
        host.noop(f"control plane initialized ({ADMIN_CONF} present)")
        return
    annotate(disruption="none (a new cluster)", diff=f"kubeadm init --config {config}\n")
    # a failed init is undone (kubeadm reset), so the next run starts clean rather than half-initialized
    yield sh(f"timeout 600 kubeadm init --config {q(config)} --upload-certs || "
             "{ rc=$?; timeout 120 kubeadm reset -f >&2 || true; exit $rc; }")


@operation()
def join_pending(config: str, script: str, endpoint: str, role: str, control_plane: str, want: Want):
    """A node without kubelet.conf has not joined: a change labelled JOIN, which workflows/k8s_join.py carries
    out after the run (a 15-minute token from the first control-plane node, given to `script` on stdin). The
    command here only checks that the join's configuration and script are in place."""
    if (snapshot(want).files.get(KUBELET_CONF) or {}).get("kind") == "file":
        host.noop(f"joined ({KUBELET_CONF} present)")
        return
    annotate(disruption=JOIN, diff=f"kubeadm join {endpoint} as a {role}: after this run, with a 15-minute token "
                                   f"from {control_plane} (never stored)\n", rollout=Handoff(K8S_JOIN))
    yield cmd("test", "-s", config, "-a", "-x", script)


@deploy("kubernetes node")
def kubernetes_node() -> None:
    node, cluster = host.data.corral_node, host.data.corral_cluster
    version = cluster.spec.kubernetes.version
    files = k8s.node_files(cluster, node)
    modules = operations.managed_file(name=MODULES, path=MODULES, want=WANT, content=files[MODULES])
    operations.run_when_changed(name="kernel modules loaded", description="modprobe overlay br_netfilter",
                                commands=["modprobe overlay", "modprobe br_netfilter"], _if=modules.did_change)
    sysctl = operations.managed_file(name=SYSCTL, path=SYSCTL, want=WANT, content=files[SYSCTL])
    operations.run_when_changed(name="sysctls applied", description="sysctl --system",
                                commands=[f"sysctl -q -p {SYSCTL}"], _if=sysctl.did_change)
    swap_off(name="swap off", want=WANT)
    if cluster.spec.packages.source != "bundle":
        pinned_key(name="Kubernetes signing key", path=KEY, url=repo_url(version) + "Release.key",
                   fingerprint=K8S_KEY_FINGERPRINT, what="the Kubernetes apt key", dearmor=True, want=WANT)
        listed = operations.managed_file(name="Kubernetes apt source", path=SOURCE, want=WANT, content=source(version))
        operations.run_when_changed(name="apt lists refreshed (Kubernetes source)", description="apt-get update",
                                    commands=["DEBIAN_FRONTEND=noninteractive apt-get update -q"],
                                    _if=listed.did_change)
    operations.managed_file(name="Kubernetes version pin", path=PIN, want=WANT, content=pin(version))
    operations.packages(name="containerd", names=["containerd"], want=WANT, together=True)
    operations.packages(name="the Kubernetes tools", names=list(TOOLS), want=WANT)  # from pkgs.k8s.io, added above
    tools_held(name="Kubernetes tools held", want=WANT)
    version_pending(name="Kubernetes version", version=version, want=WANT)
    runtime = operations.managed_file(name=CONTAINERD, path=CONTAINERD, want=WANT, content=files[CONTAINERD],
                                      disruption="restart containerd")
    operations.service(name="containerd running", unit="containerd", want=WANT)
    operations.restart(name="containerd restarted (config changed)", unit="containerd", want=WANT,
                       _if=runtime.did_change)
    operations.managed_file(name=CONFIG, path=CONFIG, want=WANT, mode="600", content=files[CONFIG])
    if KUBE_VIP in files:  # before init: kubeadm reaches the API server through the virtual IP
        operations.managed_file(name="kube-vip", path=KUBE_VIP, want=WANT, mode="600", content=files[KUBE_VIP])
    first = k8s.first_control_plane(cluster).name
    if node.name == first:
        kubeadm_init(name="kubeadm init", config=CONFIG, want=WANT)
    else:
        operations.managed_file(name=JOIN_SCRIPT, path=JOIN_SCRIPT, want=WANT, mode="700", content=files[JOIN_SCRIPT])
        role = "control-plane node" if "control-plane" in node.roles else "worker"
        join_pending(name="join pending", config=CONFIG, script=JOIN_SCRIPT, endpoint=k8s.endpoint(cluster),
                     role=role, control_plane=first, want=WANT)
