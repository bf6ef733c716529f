"""The NVIDIA driver around its operation: the package for the node's OS, the RHEL family refused, which
nodes get a driver step, NVSwitch detection, the CUDA and container toolkits' placement, the running
module. The operation itself (snapshot in -> commands or a no-op out, for Debian 12, Ubuntu 22.04/24.04
and DGX OS) is tested by its cases in tests/operations/driver_version/ (and ctk_runtime/),
run by tests/unit/test_operations_data.py."""

from __future__ import annotations

import pytest
from pyinfra.context import ctx_host

import corral.deploy.nvidia_driver as D
from corral.errors import UsageError
from corral.render.nvidia import fabricmanager_package
from corral.spec.loader import load_text

OS = {"debian12": {"name": "Debian", "major": 12, "release_meta": {"ID": "debian", "VERSION_ID": "12"}},
      "ubuntu2204": {"name": "Ubuntu", "major": 22, "release_meta": {"ID": "ubuntu", "VERSION_ID": "22.04"}},
      "ubuntu2404": {"name": "Ubuntu", "major": 24, "release_meta": {"ID": "ubuntu", "VERSION_ID": "24.04"}}}
SPEC = """\
name: lab
nodes:
  - {names: ctl, addresses: [10.0.0.10], roles: [controller]}
  - {names: gpu01, addresses: [10.0.0.11], roles: [compute], gpus: {model: h100, count: 8}}
  - {names: cpu01, addresses: [10.0.0.12], roles: [compute]}
nvidia: {driver: {version: "550.127.05"}}
"""


class FakeHost:
    """pyinfra's host as packages_for() sees it: the LinuxDistribution fact of one OS."""

    def __init__(self, os_name: str) -> None:
        self.os = OS[os_name]

    def get_fact(self, fact, **kw):
        assert fact is D.LinuxDistribution, fact
        return self.os


@pytest.mark.parametrize("os_name,package", [("debian12", "nvidia-open-550"), ("ubuntu2204", "nvidia-open-550"),
                                             ("ubuntu2404", "nvidia-open-550")])
def test_the_driver_package_follows_the_node_os(os_name, package):
    """The package name the op's cases (tests/operations/driver_version/) are given, from /etc/os-release."""
    cluster = load_text(SPEC, "cluster.yaml")
    driver = cluster.spec.nvidia.driver
    with ctx_host.use(FakeHost(os_name)):
        assert D.packages_for(driver, cluster.node("gpu01")) == [package]
    assert fabricmanager_package(driver) == "nvidia-fabricmanager-550"


@pytest.mark.parametrize("os_id,version,source,match", [("rocky", "8.9", "cuda", "rocky 8.9"),
                                                         ("rocky", "9.4", "cuda", "rocky 9.4"),
                                                         ("rhel", "9.4", "distribution", "'distribution'")])
def test_the_rhel_family_is_a_clear_error(os_id, version, source, match):
    from corral.render.nvidia import driver_package
    c = load_text(SPEC, "cluster.yaml")  # a Debian 12 spec: spec check refuses its distribution driver (the
    # support matrix), so the deploy's own guard is reached with the node's facts saying another OS
    with pytest.raises(UsageError, match=match):
        driver_package(c.spec.nvidia.driver.model_copy(update={"source": source}), c.node("gpu01"), os_id, version)


def test_gpu_less_nodes_and_an_unset_driver_get_no_step():
    cluster = load_text(SPEC, "cluster.yaml")
    assert D.skip_reason(cluster, cluster.node("cpu01")) == "no GPUs on this node"
    assert D.skip_reason(cluster, cluster.node("ctl")) == "no GPUs on this node"
    assert D.skip_reason(cluster, cluster.node("gpu01")) is None
    unmanaged = load_text(SPEC.replace('nvidia: {driver: {version: "550.127.05"}}\n', ""), "cluster.yaml")
    assert "corral leaves the installed driver alone" in D.skip_reason(unmanaged, unmanaged.node("gpu01"))


@pytest.mark.parametrize("fixture,nvswitch", [("hgx-a100x8-lspci-nn-nvidia.txt", True),
                                              ("gpuless-ryzen-x570-lspci-nn.txt", False)])
def test_nvswitch_detection_from_the_pci_scan(fixture, nvswitch):
    from pathlib import Path

    from corral.facts.gpu import parse_lspci_nn
    text = (Path(__file__).parent.parent / "fixtures" / "gpu" / "lspci" / fixture).read_text()
    assert D.has_nvswitch(parse_lspci_nn(text)) is nvswitch


TOOLS = SPEC.replace('nvidia: {driver: {version: "550.127.05"}}\n', "") + """\
  - {names: login1, addresses: [10.0.0.13], roles: [login]}
nvidia:
  driver: {version: "550.127.05"}
  cuda_toolkit: {version: "12.4"}
  container_toolkit: {engine: docker, version: "1.17.3-1"}
"""


def test_cuda_toolkit_once_on_compute_and_login_nodes_container_toolkit_on_gpu_nodes():
    import corral.deploy.nvidia_tools as T
    c = load_text(TOOLS, "cluster.yaml")
    assert T.cuda_package("12.4") == "cuda-toolkit-12-4"
    where = {n.name: (T.skip_reason(c, n, "cuda"), T.skip_reason(c, n, "container")) for n in c.nodes}
    assert where == {"ctl": ("not wanted here", "not wanted here"), "gpu01": (None, None),
                     "cpu01": (None, "not wanted here"), "login1": (None, "not wanted here")}
    virtual = load_text(TOOLS + "virtual: {subnet: 10.0.0.0/24}\n", "cluster.yaml")  # the toolkit EMULATED there
    assert T.skip_reason(virtual, virtual.node("gpu01"), "cuda") is None  # (virtual/cuda_standin.py)
    assert "not reachable from the offline virtual nodes" in T.skip_reason(virtual, virtual.node("gpu01"), "container")


def test_container_toolkit_source_and_pin():
    import corral.deploy.nvidia_tools as T
    assert "stable/deb/$(ARCH) /" in T.ctk_source("https://nvidia.github.io/libnvidia-container")
    assert "Pin: version 1.17.3-1" in T.ctk_pin("1.17.3-1") and "nvidia-container-toolkit-base" in T.ctk_pin("1.17.3-1")


def test_the_running_module_is_read_from_sysfs_or_proc():
    from corral.facts.hardware import LOADED, parse_hardware
    base = ["0,0,0", "MemTotal: 1000000 kB"]
    assert parse_hardware(base + [f"{LOADED}560.35.03"]).driver_loaded == "560.35.03"
    assert parse_hardware(base + [LOADED.strip()]).driver_loaded == ""
    assert parse_hardware(base + [f"{LOADED}garbage"]).driver_loaded == ""


def test_cuda_toolkit_from_debian_13s_archive_with_its_module():
    """nvidia.cuda_toolkit.source: distribution: Debian 13's nvidia-cuda-toolkit (12.4) from the release's archive, in
    the node's package transaction (no NVIDIA repository, no stand-in), its module setting Debian's CUDA_HOME;
    refused where the archive has none (Debian 12, Ubuntu) or another version."""
    import corral.deploy.nvidia_tools as T
    from corral.components import views
    from corral.errors import CorralError
    text = (SPEC.replace('nvidia: {driver: {version: "550.127.05"}}\n', "")
            .replace("]}", "], os: debian-13}").replace("count: 8}}", "count: 8}, os: debian-13}")
            + "  - {names: login1, addresses: [10.0.0.13], roles: [login], os: debian-13}\n"
            + "nvidia:\n  cuda_toolkit: {version: \"12.4\", source: distribution}\n")
    c = load_text(text, "cluster.yaml")
    assert T.cuda_package("12.4", "distribution", "13") == "nvidia-cuda-toolkit"
    for name in ("gpu01", "cpu01", "login1"):
        why = views.node_packages(c, c.node(name))["nvidia-cuda-toolkit"]
        assert why == "nvidia.cuda_toolkit (Debian's non-free archive)"
        assert views.may_install(c, c.node(name), "nvidia tools") == {"nvidia-cuda-toolkit"}  # no cuda-toolkit-12-4
    assert "nvidia-cuda-toolkit" not in views.node_packages(c, c.node("ctl"))
    from corral.render.lmod import cuda_module
    from corral.spec.nvidia_archive import TOOLKIT_HOME
    module = cuda_module("12.4", TOOLKIT_HOME)  # what deploy/software.py writes for source: distribution
    assert 'setenv("CUDA_HOME", "/usr/lib/cuda")' in module and "prepend_path" not in module
    with pytest.raises(CorralError, match="carries the CUDA toolkit 12.4, not 12.6"):
        load_text(text.replace('version: "12.4"', 'version: "12.6"'), "cluster.yaml")
    with pytest.raises(CorralError, match=r"corral installs no CUDA toolkit from Debian 12's archive .*fix: use "
                                          r"nvidia.cuda_toolkit.source: cuda"):
        load_text(text.replace(", os: debian-13}", "}"), "cluster.yaml")
