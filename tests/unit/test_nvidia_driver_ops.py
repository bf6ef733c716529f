"""The driver operation, pyinfra-style: node facts in (snapshot, OS release) -> commands out, or a
no-op with its reason; for Debian 12, Ubuntu 22.04/24.04, Rocky 9, DGX OS and GPU-less nodes."""

from __future__ import annotations

import hashlib

import pytest
from pyinfra.api import FileUploadCommand, StringCommand

import corral.deploy.nvidia_driver as D
from corral.deploy.nodestate import Snapshot
from corral.errors import UsageError
from corral.render.nvidia import (BLACKLIST, BLACKLIST_TEXT, PIN, VERSIONLOCK, fabricmanager_package, family,
                                  pin_text, versionlock_block)
from corral.spec.loader import load_text

OS = {"debian12": {"name": "Debian", "major": 12, "release_meta": {"ID": "debian", "VERSION_ID": "12"}},
      "ubuntu2204": {"name": "Ubuntu", "major": 22, "release_meta": {"ID": "ubuntu", "VERSION_ID": "22.04"}},
      "ubuntu2404": {"name": "Ubuntu", "major": 24, "release_meta": {"ID": "ubuntu", "VERSION_ID": "24.04"}},
      "rocky9": {"name": "Rocky Linux", "major": 9, "release_meta": {"ID": "rocky", "VERSION_ID": "9.4"}}}
SPEC = """\
name: lab
nodes:
  - {names: ctl, addresses: [10.0.0.10], roles: [controller]}
  - {names: gpu01, addresses: [10.0.0.11], roles: [compute], gpus: {model: h100, count: 8}}
  - {names: cpu01, addresses: [10.0.0.12], roles: [compute]}
nvidia: {driver: {version: "550.127.05"}}
"""


class FakeHost:
    def __init__(self, os_name: str) -> None:
        self.os, self.noops = OS[os_name], []

    def noop(self, message: str) -> None:
        self.noops.append(message)

    def get_fact(self, fact, **kw):
        assert fact is D.LinuxDistribution, fact
        return self.os


def file_state(text: str) -> dict:
    return {"kind": "file", "mode": "644", "user": "root", "group": "root",
            "sha256": hashlib.sha256(text.encode()).hexdigest()}


@pytest.fixture
def node(monkeypatch):
    notes = {}
    monkeypatch.setattr(D, "annotate", lambda **kw: notes.update(kw))

    def setup(os_name="debian12", packages=None, files=None, services=None, blocks=None):
        fake = FakeHost(os_name)
        monkeypatch.setattr(D, "host", fake)
        monkeypatch.setattr(D, "snapshot", lambda want: Snapshot(files=files or {}, packages=packages or {},
                                                                 services=services or {}, blocks=blocks or {}))
        return fake, notes
    return setup


def commands(gen) -> list[str]:
    out = []
    for c in gen:
        if isinstance(c, StringCommand):
            out.append(c.get_raw_value())
        elif isinstance(c, FileUploadCommand):
            out.append(f"upload {c.dest}")
        else:
            out.append(str(c))
    return out


def run_op(os_name: str, fake_host, nvswitch: bool = False):
    cluster = load_text(SPEC, "cluster.yaml")
    driver, gpu = cluster.spec.nvidia.driver, cluster.node("gpu01")
    fam = family(OS[os_name]["release_meta"]["ID"])
    packages = [D.package_for(driver, gpu)] + ([fabricmanager_package(driver, fam)] if nvswitch else [])
    return packages[0], commands(D.driver_version._inner(packages=packages, version=driver.version, overridden=False,
                                                         os_family=fam))


@pytest.mark.parametrize("os_name,package", [("debian12", "nvidia-open-550"), ("ubuntu2204", "nvidia-open-550"),
                                             ("ubuntu2404", "nvidia-open-550")])
def test_no_driver_yet_is_a_reboot_change_and_writes_the_blacklist(node, os_name, package):
    fake, notes = node(os_name)
    got, cmds = run_op(os_name, fake)
    assert got == package and notes["disruption"] == "reboot + drain"
    assert notes["diff"].startswith(f"{package}: not installed -> 550.127.05")
    assert f"upload {BLACKLIST}.corral-new" in cmds and not any(PIN in c for c in cmds)  # pin comes with the install
    assert cmds[-1].startswith("echo 'NVIDIA driver none -> 550.127.05: rolled out after")


def test_installed_and_pinned_is_a_noop(node):
    pin = pin_text("nvidia-open-550", "550.127.05", overridden=False)
    fake, notes = node("ubuntu2204", packages={"nvidia-open-550": "550.127.05-0ubuntu1"},
                       files={PIN: file_state(pin), BLACKLIST: file_state(BLACKLIST_TEXT)})
    _, cmds = run_op("ubuntu2204", fake)
    assert cmds == [] and fake.noops == ["NVIDIA driver 550.127.05 installed and pinned (nvidia-open-550 550.127.05-0ubuntu1)"]


def test_a_removed_pin_is_restored_without_a_reboot(node):
    fake, notes = node("debian12", packages={"nvidia-open-550": "550.127.05-1"},
                       files={BLACKLIST: file_state(BLACKLIST_TEXT)})
    _, cmds = run_op("debian12", fake)
    assert notes["disruption"] == "none" and f"upload {PIN}.corral-new" in cmds and f"mv -f {PIN}.corral-new {PIN}" in cmds


def test_another_installed_version_is_a_reboot_change(node):
    fake, notes = node("debian12", packages={"nvidia-open-550": "550.90.07-1"},
                       files={BLACKLIST: file_state(BLACKLIST_TEXT)})
    _, cmds = run_op("debian12", fake)
    assert notes["disruption"] == "reboot + drain" and "550.90.07-1 -> 550.127.05" in notes["diff"]
    assert len(cmds) == 1  # nothing but the note: the rollout does the work


def test_dgx_os_is_skipped_with_its_reason(node):
    fake, _ = node("ubuntu2204", files={D.DGX_RELEASE: file_state("DGX_NAME=DGX Server\n")})
    _, cmds = run_op("ubuntu2204", fake)
    assert cmds == [] and fake.noops == ["skipped: DGX OS: the driver is managed by NVIDIA's DGX software stack"]


def test_rocky_without_a_driver_is_a_reboot_change_with_the_blacklist_and_no_apt_pin(node):
    fake, notes = node("rocky9")
    package, cmds = run_op("rocky9", fake)
    assert package == "nvidia-driver" and notes["disruption"] == "reboot + drain"
    assert notes["diff"].startswith("nvidia-driver: not installed -> 550.127.05")
    assert f"upload {BLACKLIST}.corral-new" in cmds and not any(PIN in c or VERSIONLOCK in c for c in cmds)


def test_rocky_installed_and_locked_is_a_noop_and_a_lost_lock_comes_back(node):
    block = hashlib.sha256(versionlock_block("550.127.05").encode()).hexdigest()
    fake, _ = node("rocky9", packages={"nvidia-driver": "550.127.05-1.el9"}, files={BLACKLIST: file_state(BLACKLIST_TEXT)},
                   blocks={VERSIONLOCK: block})
    _, cmds = run_op("rocky9", fake)
    assert cmds == [] and fake.noops[0].startswith("NVIDIA driver 550.127.05 installed and pinned (nvidia-driver")
    fake, notes = node("rocky9", packages={"nvidia-driver": "550.127.05-1.el9"}, files={BLACKLIST: file_state(BLACKLIST_TEXT)})
    _, cmds = run_op("rocky9", fake)
    assert notes["disruption"] == "none" and notes["diff"] == f"{VERSIONLOCK}: corral's lock restored\n"
    assert len(cmds) == 1 and "sed -i" in cmds[0] and "nvidia-*-*:550.127.05-*" in cmds[0]


@pytest.mark.parametrize("os_id,version,source,match", [("rocky", "8.9", "cuda", "rocky 8.9"),
                                                         ("rhel", "9.4", "distribution", "'distribution'")])
def test_rhel_family_limits_are_clear_errors(os_id, version, source, match):
    from corral.render.nvidia import driver_package
    c = load_text(SPEC.replace('"550.127.05"}', f'"550.127.05", source: {source}}}'), "cluster.yaml")
    with pytest.raises(UsageError, match=match):
        driver_package(c.spec.nvidia.driver, c.node("gpu01"), os_id, version)


def test_gpu_less_nodes_and_an_unset_driver_get_no_step():
    cluster = load_text(SPEC, "cluster.yaml")
    assert D.skip_reason(cluster, cluster.node("cpu01")) == "no GPUs on this node"
    assert D.skip_reason(cluster, cluster.node("ctl")) == "no GPUs on this node"
    assert D.skip_reason(cluster, cluster.node("gpu01")) is None
    unmanaged = load_text(SPEC.replace('nvidia: {driver: {version: "550.127.05"}}\n', ""), "cluster.yaml")
    assert "corral leaves the installed driver alone" in D.skip_reason(unmanaged, unmanaged.node("gpu01"))


PINNED = {PIN: file_state(pin_text("nvidia-open-550", "550.127.05", overridden=False)),
          BLACKLIST: file_state(BLACKLIST_TEXT)}


def test_an_nvswitch_node_gets_fabric_manager_at_the_driver_version(node):
    fake, notes = node("ubuntu2204", packages={"nvidia-open-550": "550.127.05-0ubuntu1"}, files=PINNED)
    _, cmds = run_op("ubuntu2204", fake, nvswitch=True)
    assert notes["disruption"] == "reboot + drain"
    assert notes["diff"].startswith("nvidia-fabricmanager-550: not installed -> 550.127.05")


def test_stopped_fabric_manager_and_persistenced_are_started(node):
    fake, notes = node("ubuntu2204", files=PINNED,
                       packages={"nvidia-open-550": "550.127.05-0ubuntu1", "nvidia-fabricmanager-550": "550.127.05-1"},
                       services={"nvidia-persistenced": ("inactive", "disabled"),
                                 "nvidia-fabricmanager": ("failed", "enabled")})
    _, cmds = run_op("ubuntu2204", fake, nvswitch=True)
    assert notes["disruption"] == "start nvidia-persistenced, nvidia-fabricmanager"
    assert cmds == ["systemctl enable --now nvidia-persistenced", "systemctl enable --now nvidia-fabricmanager"]


def test_a_driver_without_persistenced_unit_is_left_as_it_is(node):
    fake, _ = node("debian12", files=PINNED, packages={"nvidia-open-550": "550.127.05-1"},
                   services={"nvidia-persistenced": ("inactive", "not-found")})
    _, cmds = run_op("debian12", fake)
    assert cmds == [] and fake.noops[0].startswith("NVIDIA driver 550.127.05 installed and pinned")


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
    virtual = load_text(TOOLS + "virtual: {subnet: 10.0.0.0/24}\n", "cluster.yaml")
    assert "not reachable from the offline virtual nodes" in T.skip_reason(virtual, virtual.node("gpu01"), "cuda")


def test_container_toolkit_source_pin_and_runtime(monkeypatch):
    import corral.deploy.nvidia_tools as T
    assert "stable/deb/$(ARCH) /" in T.ctk_source("https://nvidia.github.io/libnvidia-container")
    assert "Pin: version 1.17.3-1" in T.ctk_pin("1.17.3-1") and "nvidia-container-toolkit-base" in T.ctk_pin("1.17.3-1")
    notes = {}
    monkeypatch.setattr(T, "annotate", lambda **kw: notes.update(kw))
    monkeypatch.setattr(T, "snapshot", lambda want: Snapshot())
    cmds = commands(T.ctk_runtime._inner(engine="docker", want=T.WANT))
    assert cmds[:2] == ["nvidia-ctk runtime configure --runtime=docker", "systemctl restart docker"]
    assert notes["disruption"] == "restart docker"
    marker = file_state("engine=docker\n")
    fake = FakeHost("debian12")
    monkeypatch.setattr(T, "host", fake)
    monkeypatch.setattr(T, "snapshot", lambda want: Snapshot(files={T.RUNTIME_MARK: marker}))
    assert commands(T.ctk_runtime._inner(engine="docker", want=T.WANT)) == []
    assert fake.noops == ["NVIDIA runtime configured for docker"]


def test_an_installed_driver_not_yet_loaded_needs_a_reboot(node):
    fake, notes = node("debian12", packages={"nvidia-open-550": "550.127.05-1"}, files=PINNED)
    cmds = commands(D.driver_version._inner(packages=["nvidia-open-550"], version="550.127.05", overridden=False,
                                            loaded="550.90.07"))
    assert notes["disruption"] == "reboot + drain" and len(cmds) == 1
    assert notes["diff"].startswith("nvidia kernel module: 550.90.07 running, 550.127.05 installed: reboot required")
    fake, _ = node("debian12", packages={"nvidia-open-550": "550.127.05-1"}, files=PINNED)
    assert commands(D.driver_version._inner(packages=["nvidia-open-550"], version="550.127.05", overridden=False,
                                            loaded="550.127.05")) == []


def test_the_running_module_is_read_from_sysfs_or_proc():
    from corral.facts.hardware import LOADED, parse_hardware
    base = ["0,0,0", "MemTotal: 1000000 kB"]
    assert parse_hardware(base + [f"{LOADED}560.35.03"]).driver_loaded == "560.35.03"
    assert parse_hardware(base + [LOADED.strip()]).driver_loaded == ""
    assert parse_hardware(base + [f"{LOADED}garbage"]).driver_loaded == ""
