"""nvidia tools: the CUDA toolkit (compute and login nodes, one package, once) and the NVIDIA
Container Toolkit (GPU compute nodes; runtime configured for the spec's container engine), both
from NVIDIA's repositories on real clusters. The offline virtual cluster cannot reach them: its container
toolkit is skipped (said in plan); its CUDA toolkit is the one a bundle carries, else the EMULATED stand-in
corral puts in its own repository (virtual/cuda_standin.py: an nvcc that compiles nothing), installed by the
same apt request, so the `cuda` module is proven on virtual nodes."""

from __future__ import annotations

from pyinfra import host
from pyinfra.api import deploy, operation

from corral.engine.shell import cmd

from corral.deploy import operations
from corral.deploy.installs import installs
from corral.deploy.nodestate import Want, register, register_for_run, snapshot
from corral.engine.notes import annotate
from corral.deploy.apt_keys import pinned_key
from corral.deploy.nvidia_repo import cuda_repository
from corral.render.vendor_repos import CTK_PACKAGES, ctk_fingerprint, ctk_pin
from corral import paths
from corral.spec.nvidia_archive import TOOLKIT
from corral.spec.releases import release

CTK_KEY = "/usr/share/keyrings/nvidia-container-toolkit-keyring.gpg"
CTK_SOURCE = "/etc/apt/sources.list.d/nvidia-container-toolkit.list"
CTK_PIN = "/etc/apt/preferences.d/corral-nvidia-container-toolkit"
RUNTIME_MARK = paths.CTK_RUNTIME_MARK
WANT = register(Want(paths=(CTK_KEY, CTK_SOURCE, CTK_PIN, RUNTIME_MARK),
                     packages=("cuda-keyring", *CTK_PACKAGES)))


def cuda_package(version: str, source: str = "cuda", os_version: str = "") -> str:
    """NVIDIA's cuda-toolkit-X-Y, or the package of the release's own archive (Debian 13: nvidia-cuda-toolkit)."""
    if source == "distribution":
        return TOOLKIT[os_version.split(".")[0]][1]  # its version is checked against the archive by spec check
    return "cuda-toolkit-" + version.replace(".", "-")


def skip_reason(cluster, node, what: str) -> str | None:
    """Why `what` (cuda | container) is not installed on this node (None: it is)."""
    spec = cluster.spec.nvidia.cuda_toolkit if what == "cuda" else cluster.spec.nvidia.container_toolkit
    roles = ("compute", "login") if what == "cuda" else ("compute",)
    if spec is None or not any(r in node.roles for r in roles) or (what == "container" and not node.gpu_count):
        return "not wanted here"
    if cluster.spec.virtual is not None and what == "container":
        return "virtual cluster: NVIDIA's package repositories are not reachable from the offline virtual nodes"
    return None  # the toolkit on a virtual cluster: the bundle's, else corral's stand-in (virtual/cuda_standin.py)


def ctk_source(repo_url: str) -> str:
    return (f"# Managed by corral: NVIDIA Container Toolkit\n"
            f"deb [signed-by={CTK_KEY}] {repo_url.rstrip('/')}/stable/deb/$(ARCH) /\n")


def runtime_marker(engine: str) -> str:
    """RUNTIME_MARK's text: the engine `nvidia-ctk runtime configure` was run for."""
    return f"engine={engine}\n"


@installs(lambda engine, **_: {RUNTIME_MARK: runtime_marker(engine)})
@operation()
def ctk_runtime(engine: str, want: Want):
    """`nvidia-ctk runtime configure` for the engine, once per engine (a marker records which)."""
    marker = runtime_marker(engine)
    import hashlib
    if (snapshot(want).files.get(RUNTIME_MARK) or {}).get("sha256") == hashlib.sha256(marker.encode()).hexdigest():
        host.noop(f"NVIDIA runtime configured for {engine}")
        return
    annotate(disruption=f"restart {engine}")
    yield cmd("nvidia-ctk", "runtime", "configure", f"--runtime={engine}")
    yield cmd("systemctl", "restart", engine)
    yield from operations.install_commands(RUNTIME_MARK, marker.encode(), "644", "root", "root")


@deploy("nvidia tools")
def nvidia_tools() -> None:
    node, cluster = host.data.corral_node, host.data.corral_cluster
    n = cluster.spec.nvidia
    for what, label in (("cuda", "CUDA toolkit"), ("container", "NVIDIA Container Toolkit")):
        reason = skip_reason(cluster, node, what)
        if reason and reason != "not wanted here":
            operations.skip(name=label, reason=reason)
    if skip_reason(cluster, node, "cuda") is None:
        archive = n.cuda_toolkit.source == "distribution"
        package = cuda_package(n.cuda_toolkit.version, n.cuda_toolkit.source, release(node.os).version)
        register_for_run(Want(packages=(package,)))
        emulated = cluster.spec.virtual is not None and cluster.spec.packages.source != "bundle" and not archive
        if cluster.spec.virtual is None and not archive:
            cuda_repository(name="NVIDIA CUDA repository", want=WANT,
                            repo_url=n.driver.repo_url if n.driver else "https://developer.download.nvidia.com/compute/cuda/repos")
        operations.packages(name=f"CUDA toolkit {n.cuda_toolkit.version}" + (" (EMULATED: corral's stand-in)"
                                                                             if emulated else ""),
                            names=[package], want=WANT, together=archive)
    if skip_reason(cluster, node, "container") is None:
        c = n.container_toolkit
        if cluster.spec.packages.source != "bundle":  # else the bundle's repository carries it (bundle/vendor.py)
            pinned_key(name="NVIDIA Container Toolkit signing key", path=CTK_KEY,
                       url=c.repo_url.rstrip("/") + "/gpgkey", fingerprint=ctk_fingerprint(cluster),
                       what="NVIDIA container toolkit key", dearmor=True, want=WANT)
            source = operations.managed_file(name="NVIDIA Container Toolkit apt source", path=CTK_SOURCE, want=WANT,
                                             content=ctk_source(c.repo_url))
            operations.run_when_changed(name="apt lists refreshed (container toolkit source)",
                                        description="apt-get update",
                                        commands=["DEBIAN_FRONTEND=noninteractive apt-get update -q"],
                                        _if=source.did_change)
        operations.managed_file(name="NVIDIA Container Toolkit version pin", path=CTK_PIN, want=WANT, content=ctk_pin(c.version))
        operations.packages(name="NVIDIA Container Toolkit installed", want=WANT,
                     names=[f"nvidia-container-toolkit={c.version}" if c.version else "nvidia-container-toolkit"])
        if c.engine != "none":
            ctk_runtime(name=f"NVIDIA runtime for {c.engine}", engine=c.engine, want=WANT)
