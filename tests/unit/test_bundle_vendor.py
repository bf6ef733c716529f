"""The vendors' repositories in a bundle (render/vendor_repos.py, bundle/vendor.py): which packages a spec
takes from NVIDIA's CUDA repository, its container toolkit repository and Grafana's; their keys pinned
by fingerprint; apt resolving against the host's sources plus signed stand-in repositories served on
loopback; coverage naming a missing or other-version package per node."""

from __future__ import annotations

import shutil

import pytest

from corral.bundle.coverage import gaps
from corral.bundle.vendor import apt_options, fetch_key
from corral.errors import HostToolError
from corral.render.packages import cuda_repo_packages
from corral.spec.loader import load_text
from corral.render.vendor_repos import vendor_repos
from tests.vcluster.standin import PACKAGE, build_ctk_repo, build_cuda_repo, build_deb, build_plain_deb, serve_dir

SPEC = """name: t
ssh: {user: root}
nodes:
  - {names: ctl, addresses: [10.0.0.10], roles: [controller, monitoring]}
  - {names: login1, addresses: [10.0.0.9], roles: [login]}
  - {names: "gpu[01-02]", addresses: "10.0.0.[11-12]", roles: [compute], gpus: {model: h100, count: 8}}
  - {names: cpu01, addresses: [10.0.0.20], roles: [compute]}
"""


def spec(extra: str = ""):
    return load_text(SPEC + extra, "cluster.yaml")


def cuda_repo(cluster):
    return next((r for r in vendor_repos(cluster) if r.name == "NVIDIA CUDA repository"), None)


def test_what_a_spec_takes_from_the_cuda_repository():
    s = spec("nvidia:\n  driver: {version: 550.127.05}\n  cuda_toolkit: {version: '12.4'}\n"
             "  dcgm: {version: '1:4.1.1-1'}\nacceptance: {nccl: {enabled: true, sha256: skip, nccl_version: 2.21.5-1+cuda12.4}}\n")
    assert cuda_repo_packages(s) == {
        "cuda-toolkit-12-4": ["nvidia.cuda_toolkit"],
        "datacenter-gpu-manager-4-cuda12=1:4.1.1-1": ["nvidia.dcgm"],
        "datacenter-gpu-manager-exporter": ["monitoring.dcgm_exporter"],
        "libnccl-dev=2.21.5-1+cuda12.4": ["acceptance.nccl"], "libnccl2=2.21.5-1+cuda12.4": ["acceptance.nccl"],
        "nvidia-fabricmanager-550": ["nvidia.driver (Fabric Manager, NVSwitch systems)"],
        "nvidia-open-550": ["nvidia.driver"]}
    repo = cuda_repo(s)
    assert repo.source == "https://developer.download.nvidia.com/compute/cuda/repos/debian12/x86_64/ /"
    assert repo.key_url.endswith("/debian12/x86_64/cuda-keyring_1.1-1_all.deb") and repo.keyring_deb
    assert repo.fingerprint == "EB693B3035CD5710E231E123A4B469963BF863CC"
    assert "Package: nvidia-open-550 nvidia-* libnvidia-* cuda-drivers*\nPin: version 550.127.05-*" in repo.pin
    # nothing from it: DCGM off, no driver, no toolkit
    off = spec("nvidia: {dcgm: {enabled: false}}\nmonitoring: {dcgm_exporter: {enabled: false}}\n"
               "acceptance: {nccl: {enabled: false}}\n")
    assert cuda_repo_packages(off) == {} and cuda_repo(off) is None


def test_a_mirror_key_and_an_overridden_package():
    s = spec(f"nvidia:\n  driver: {{version: '1.0', package: {PACKAGE}, repo_url: 'https://mirror.example/cuda', "
             "repo_fingerprint: " + "ab" * 20 + "}\n  dcgm: {enabled: false}\n"
             "monitoring: {dcgm_exporter: {enabled: false}}\nacceptance: {nccl: {enabled: false}}\n")
    repo = cuda_repo(s)
    assert repo.packages == {PACKAGE: ["nvidia.driver"]}  # no Fabric Manager guessed for a package the spec names
    assert repo.source == "https://mirror.example/cuda/debian12/x86_64/ /" and repo.fingerprint == "AB" * 20
    assert repo.pin.startswith("# Managed by corral") and f"Package: {PACKAGE}\nPin: version 1.0-*" in repo.pin


def _manifest(*packages):
    return {"packages": [{"package": p, "version": v} for p, v in packages]}


def test_coverage_names_the_driver_per_node_at_the_spec_version():
    s = spec("nvidia:\n  driver: {version: 550.127.05}\n  dcgm: {enabled: false}\n  cuda_toolkit: {version: '12.4'}\n"
             "monitoring: {dcgm_exporter: {enabled: false}, grafana: {enabled: false}}\n"
             "acceptance: {nccl: {enabled: false}}\n")
    everything = [(p, "1") for p in ("chrony", "prometheus-node-exporter",
                                     "slurmctld", "slurm-client", "munge", "python3-prometheus-client", "slurmd",
                                     "python3-venv", "prometheus", "prometheus-alertmanager",
                                     "libpam-slurm-adopt", "perftest")]
    cuda = [("nvidia-open-550", "550.127.05-1"), ("nvidia-fabricmanager-550", "550.127.05-1"),
            ("cuda-toolkit-12-4", "12.4.1-1")]
    assert gaps(s, _manifest(*everything, *cuda)) == {}
    older = [("nvidia-open-550", "550.90.07-1"), ("nvidia-fabricmanager-550", "550.127.05-1")]
    found = gaps(s, _manifest(*everything, *older))
    assert found["gpu01"] == ["needs cuda-toolkit-12-4 (nvidia.cuda_toolkit): not in the bundle",
                              "needs nvidia-open-550 550.127.05 (nvidia.driver.version): the bundle has 550.90.07-1"]
    assert found["login1"] == ["needs cuda-toolkit-12-4 (nvidia.cuda_toolkit): not in the bundle"]
    assert "ctl" not in found  # the controller takes nothing from NVIDIA's repository


def test_the_container_toolkit_and_grafana_repositories_with_their_pinned_keys():
    s = spec("nvidia:\n  container_toolkit: {engine: docker, version: 1.17.3-1}\n  dcgm: {enabled: false}\n"
             "monitoring: {dcgm_exporter: {enabled: false}, grafana: {version: 11.3.0}}\n")
    ctk, grafana = vendor_repos(s)
    assert (ctk.name, ctk.source, ctk.key_url, ctk.fingerprint, ctk.packages) == (
        "NVIDIA container toolkit repository", "https://nvidia.github.io/libnvidia-container/stable/deb/amd64 /",
        "https://nvidia.github.io/libnvidia-container/gpgkey", "C95B321B61E88C1809C4F759DDCAE044F796ECB0",
        {"nvidia-container-toolkit=1.17.3-1": ["nvidia.container_toolkit"]})
    assert "Package: nvidia-container-toolkit nvidia-container-toolkit-base" in ctk.pin and not ctk.keyring_deb
    assert (grafana.source, grafana.key_url, grafana.fingerprint, grafana.packages) == (
        "https://apt.grafana.com stable main", "https://apt.grafana.com/gpg.key",
        "B53AE77BADB630A683046005963FA27710458545", {"grafana=11.3.0": ["monitoring.grafana"]})
    mirrored = spec("nvidia: {container_toolkit: {repo_fingerprint: " + "0a" * 20 + "}, dcgm: {enabled: false}}\n"
                    "monitoring: {dcgm_exporter: {enabled: false}, grafana: {key_fingerprint: " + "1b" * 20 + "}}\n")
    assert [r.fingerprint for r in vendor_repos(mirrored)] == ["0A" * 20, "1B" * 20]
    everything = [(p, "1") for p in ("chrony", "prometheus-node-exporter",
                                     "slurmctld", "slurm-client", "munge", "python3-prometheus-client", "slurmd",
                                     "python3-venv", "prometheus", "prometheus-alertmanager",
                                     "libpam-slurm-adopt", "perftest")]
    assert gaps(s, _manifest(*everything, ("nvidia-container-toolkit", "1.17.3-1"), ("grafana", "11.3.0"))) == {}
    found = gaps(s, _manifest(*everything, ("nvidia-container-toolkit", "1.16.2-1")))
    assert found == {"ctl": ["needs grafana 11.3.0 (monitoring.grafana): not in the bundle"],
                     **{g: ["needs nvidia-container-toolkit 1.17.3-1 (nvidia.container_toolkit): the bundle has 1.16.2-1"]
                        for g in ("gpu01", "gpu02")}}


def test_a_bundle_may_carry_every_vendor_package_but_not_ubuntu_driver_packages():
    base = "packages: {source: bundle, bundle: b.tar, serve: 10.0.0.1:8079}\n"
    assert spec(base + "nvidia: {driver: {version: 550.127.05}, cuda_toolkit: {version: '12.4'}, "
                       "container_toolkit: {engine: docker}}\n")
    from corral.errors import CorralError
    with pytest.raises(CorralError, match="the NVIDIA driver from the distribution"):
        spec(base + "nvidia: {driver: {version: 550.127.05, source: distribution}}\n")


_site = serve_dir


needs_tools = pytest.mark.skipif(not all(shutil.which(t) for t in ("gpg", "dpkg-deb", "dpkg-scanpackages", "apt-get")),
                                 reason="gpg, dpkg-dev and apt are needed")


@needs_tools
def test_the_keyring_must_hold_exactly_the_pinned_key_and_apt_resolves_from_the_signed_repository(tmp_path):
    from corral.bundle.resolve import resolve
    debs = tmp_path / "debs"
    fpr = build_cuda_repo(tmp_path / "site", [build_deb(debs, "1.0")], tmp_path / "key")
    with _site(tmp_path / "site") as url:
        def extra(key: str) -> str:
            return (f"allow_http: true\nnvidia:\n  driver: {{version: '1.0', package: {PACKAGE}, repo_url: '{url}', "
                    f"repo_fingerprint: {key}}}\n  dcgm: {{enabled: false}}\n"
                    "monitoring: {dcgm_exporter: {enabled: false}}\nacceptance: {nccl: {enabled: false}}\n")
        wrong = cuda_repo(spec(extra("CD" * 20)))
        with pytest.raises(HostToolError, match=f"its key is {fpr}, not exactly NVIDIA CUDA repository's key {'CD' * 20}"):
            fetch_key(wrong, tmp_path / "wrong")
        repo = cuda_repo(spec(extra(fpr)))
        options = apt_options([repo], tmp_path / "apt")
        status = tmp_path / "status"
        status.write_text("")
        assert resolve(status, [PACKAGE], tmp_path / "work", options) == [f"{PACKAGE}_1.0-1_all.deb"]
    assert not any("127.0.0.1" in f.name for f in __import__("pathlib").Path("/var/lib/apt/lists").iterdir())


@needs_tools
def test_a_repository_not_signed_by_the_pinned_key_is_refused(tmp_path):
    debs = tmp_path / "debs"
    build_cuda_repo(tmp_path / "site", [build_deb(debs, "1.0")], tmp_path / "key")
    other = build_cuda_repo(tmp_path / "other", [build_deb(debs, "1.0")], tmp_path / "otherkey")
    # the keyring says `other`, the repository is signed by the first key: apt refuses the signature
    shutil.copy(tmp_path / "other/debian12/x86_64/cuda-keyring_1.1-1_all.deb",
                tmp_path / "site/debian12/x86_64/cuda-keyring_1.1-1_all.deb")
    with _site(tmp_path / "site") as url:
        repo = cuda_repo(spec(f"allow_http: true\nnvidia:\n  driver: {{version: '1.0', package: {PACKAGE}, "
                              f"repo_url: '{url}', repo_fingerprint: {other}}}\n"))
        with pytest.raises(HostToolError, match="apt cannot read NVIDIA CUDA repository http"):
            apt_options([repo], tmp_path / "apt")


@needs_tools
def test_an_armored_key_file_and_two_repositories_resolved_together(tmp_path):
    """The container toolkit's layout: an ASCII-armored key at <url>/gpgkey, stable/deb/amd64/; resolved beside
    the CUDA stand-in in one private configuration; a key file of another key is refused by name."""
    from corral.bundle.resolve import resolve
    ctk_fpr = build_ctk_repo(tmp_path / "ctk", [build_plain_deb(tmp_path / "d", "nvidia-container-toolkit", "9.9.9-1")],
                             tmp_path / "k1")
    cuda_fpr = build_cuda_repo(tmp_path / "ctk" / "cuda", [build_deb(tmp_path / "d2", "1.0")], tmp_path / "k2")
    with _site(tmp_path / "ctk") as url:
        extra = (f"allow_http: true\nnvidia:\n  driver: {{version: '1.0', package: {PACKAGE}, repo_url: '{url}/cuda', "
                 f"repo_fingerprint: {cuda_fpr}}}\n  container_toolkit: {{engine: docker, version: 9.9.9-1, "
                 f"repo_url: '{url}', repo_fingerprint: {{ctk}}}}\n  dcgm: {{enabled: false}}\n"
                 "monitoring: {dcgm_exporter: {enabled: false}, grafana: {enabled: false}}\n"
                 "acceptance: {nccl: {enabled: false}}\n")
        bad = vendor_repos(spec(extra.replace("{ctk}", cuda_fpr)))
        with pytest.raises(HostToolError, match=f"gpgkey: its key is {ctk_fpr}, not exactly NVIDIA container toolkit "
                                                f"repository's key {cuda_fpr}"):
            apt_options(bad, tmp_path / "bad")
        repos = vendor_repos(spec(extra.replace("{ctk}", ctk_fpr)))
        assert [r.name for r in repos] == ["NVIDIA CUDA repository", "NVIDIA container toolkit repository"]
        options = apt_options(repos, tmp_path / "apt")
        status = tmp_path / "status"
        status.write_text("")
        assert resolve(status, ["nvidia-container-toolkit=9.9.9-1", PACKAGE], tmp_path / "work", options) == [
            f"{PACKAGE}_1.0-1_all.deb", "nvidia-container-toolkit_9.9.9-1_all.deb"]
    assert (tmp_path / "apt" / "keyrings" / "1.asc").read_bytes().startswith(b"-----BEGIN PGP PUBLIC KEY BLOCK")
