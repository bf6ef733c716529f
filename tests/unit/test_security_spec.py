"""Security findings of the hardening issue, reproduced: each hostile spec value is a located error
(it used to pass `spec check` and reach a root shell or a config file), each download is checked,
secrets stay out of diffs and world-readable paths."""

from __future__ import annotations

import hashlib
import os
import shlex
import subprocess
import textwrap
from pathlib import Path

import pytest
from pyinfra.api import FileUploadCommand

from corral.deploy import nvidia_repo
from corral.deploy.operations import STAGE_DIR, _staging, mask_diff
from corral.errors import SpecError
from corral.spec.rules_download import download_warnings
from corral.spec.loader import load_text

BASE = textwrap.dedent("""\
    name: lab
    nodes:
      - {names: ctl, addresses: [10.0.0.10], roles: [controller, accounting]}
      - {names: "gpu[01-02]", addresses: [10.0.0.11, 10.0.0.12], roles: [compute], gpus: {model: h100, count: 4}}
    """)


def problems(extra: str, base: str = BASE) -> list[str]:
    with pytest.raises(SpecError) as err:
        load_text(base + extra, "cluster.yaml")
    return [f"{p.where}: {p.message}" for p in err.value.problems]


def loads(extra: str, base: str = BASE):
    return load_text(base + extra, "cluster.yaml")


PWNED = "https://x/a;touch${IFS}/tmp/PWNED;#"


@pytest.mark.parametrize("section", [
    'nvidia: {driver: {version: "550.127.05", repo_url: "%s"}}',
    'nvidia: {container_toolkit: {repo_url: "%s"}}',
    'monitoring: {grafana: {repo_url: "%s"}}',
    'monitoring: {grafana: {key_url: "%s"}}',
    'monitoring: {dcgm_exporter: {repo_url: "%s"}}',
    'monitoring: {alerts: {receivers: [{name: ops, webhook: "%s"}]}}',
    'nvidia: {enroot: {version: 3.5.0, sha256: skip, url: "%s"}}',
])
@pytest.mark.parametrize("url", [PWNED, "https://x/$(id)", "https://x/`id`", "https://x/a b", "https://x/'q'",
                                 "https://x/a\nb", "ftp://x/y", "https://user:pw@x/y", "https://x:99999/y"])
def test_shell_characters_in_any_url_are_a_located_error(section, url):
    import json
    found = problems(section.replace('"%s"', json.dumps(url)) + "\n")
    assert found and all(f.startswith("cluster.yaml:5:") for f in found), found


def test_http_needs_allow_http_and_is_then_warned_about():
    section = 'nvidia: {driver: {version: "550.127.05", repo_url: "http://mirror.lan/cuda"}}\n'
    (found,) = problems(section)
    assert "cluster.yaml:5:" in found and "http://" in found
    c = loads("allow_http: true\n" + section)
    assert download_warnings(c) == ["nvidia.driver.repo_url: http://mirror.lan/cuda fetched over plain http "
                                    "(allow_http: true)"]


@pytest.mark.parametrize("extra, where, what", [
    ('slurm: {fairshare: {decay_half_life: "7-0\\nPrologSlurmctld=/tmp/x.sh"}}\n', ":5:", "not a Slurm time"),
    ('slurm: {partitions: [{name: p, max_time: "1:00\\nX=1"}]}\n', ":5:", "not a Slurm time"),
    ('health: {services: ["-H evil"]}\n', ":5:", "not a systemd unit name"),
    ('health: {mounts: ["/data\\nx"]}\n', ":5:", "a path here may use"),
    ('health: {mounts: ["/data/../etc"]}\n', ":5:", "normalised path"),
    ('health: {min_free_mb: {"/tmp;id": 1}}\n', ":5:", "a path here may use"),
    ('monitoring: {gpu_job_map_dir: "/run/x y"}\n', ":5:", "a path here may use"),
    ('ssh: {key: "k\\nProxyCommand sh"}\n', ":5:", "ssh.key"),
    ('ssh: {jump_host: "-oProxyCommand=x"}\n', ":5:", "ssh.jump_host"),
    ('ssh: {user: "root\\n"}\n', ":5:", "not a Unix user name"),
    ('monitoring: {alerts: {smtp: {smarthost: "mail;id:25", sender: a@b.c}}}\n', ":5:", "host:port"),
    ('nvidia: {enroot: {version: 3.5.0, sha256: skip, settings: {ENROOT_X: "$(id)"}}}\n', ":5:", "through a shell"),
    ('nvidia: {enroot: {version: 3.5.0, sha256: skip}, pyxis: {version: 0.20.0, sha256: skip, '
     'args: {runtime_path: "/run/p;id"}}}\n', ":5:", "one word"),
])
def test_config_and_command_injection_is_a_located_error(extra, where, what):
    found = problems(extra)
    assert any(where in f and what in f for f in found), found


def test_a_node_name_with_a_trailing_newline_is_refused():
    found = problems("", base=BASE.replace('names: "gpu[01-02]"', 'names: "gpu03\\n"'))
    assert any("cluster.yaml:4:" in f and "names" in f for f in found), found


def test_every_download_needs_a_sha256_or_an_explicit_skip():
    found = problems("nvidia: {enroot: {version: 3.5.0, sha256: {enroot: %s}}, pyxis: {version: 0.20.0}}\n" % ("a" * 64))
    assert any("no sha256 for enroot+caps" in f for f in found), found
    assert any("no sha256 for pyxis source" in f for f in found), found
    mig = BASE.replace("count: 4}", "count: 4, mig: [{gpus: all, profiles: [3g.40gb]}]}")
    assert any("no sha256 for nvidia-mig-manager" in f for f in problems("", base=mig))
    ok = loads("nvidia: {enroot: {version: 3.5.0, sha256: skip}, pyxis: {version: 0.20.0, sha256: skip}}\n")
    assert download_warnings(ok) == [
        "nvidia.enroot.sha256: skip - enroot, enroot+caps installed as root without a checksum",
        "nvidia.pyxis.sha256: skip - pyxis source installed as root without a checksum"]


def test_the_nodes_old_db_password_never_shows_in_a_diff():
    diff = ("--- a\n+++ b\n@@ -1,3 +1,3 @@\n StorageUser=slurm\n-StoragePass=OldSecret-4711\n"
            "+StoragePass=NewSecret-0815\n StorageLoc=slurm_acct_db\n")
    masked = mask_diff(diff, ("NewSecret-0815",), ("StoragePass",))
    assert "OldSecret" not in masked and "NewSecret" not in masked
    assert "-StoragePass=********" in masked and "+StoragePass=********" in masked
    assert " StorageLoc=slurm_acct_db" in masked


def test_uploads_through_sudo_are_staged_in_a_private_directory():
    assert _staging("/etc/munge/munge.key", "root") == ([], None)
    stage, staged = _staging("/etc/munge/munge.key", "deploy")
    assert [c.get_raw_value() for c in stage] == [f"install -d -m 700 -o deploy {STAGE_DIR}"]
    assert staged.startswith(f"{STAGE_DIR}/") and "/tmp" not in staged
    assert FileUploadCommand("x", "/etc/x", remote_temp_filename=staged).remote_temp_filename == staged


def _keyring_deb(tmp: Path) -> tuple[Path, str]:
    """A .deb like cuda-keyring's, carrying a key generated here; and that key's fingerprint."""
    home = tmp / "gnupg"
    home.mkdir(mode=0o700)
    env = dict(os.environ, GNUPGHOME=str(home))
    subprocess.run(["gpg", "--batch", "--passphrase", "", "--quick-gen-key", "test@corral", "ed25519", "sign",
                    "never"], env=env, check=True, capture_output=True)
    fpr = next(line.split(":")[9] for line in subprocess.run(
        ["gpg", "--with-colons", "--list-keys"], env=env, capture_output=True, text=True, check=True).stdout.splitlines()
        if line.startswith("fpr"))
    root = tmp / "pkg"
    (root / "DEBIAN").mkdir(parents=True)
    (root / "usr/share/keyrings").mkdir(parents=True)
    (root / "DEBIAN/control").write_text("Package: cuda-keyring\nVersion: 1.1-1\nArchitecture: all\n"
                                         "Maintainer: test\nDescription: test\n")
    key = subprocess.run(["gpg", "--export", fpr], env=env, capture_output=True, check=True).stdout
    (root / "usr/share/keyrings/cuda-archive-keyring.gpg").write_bytes(key)
    deb = tmp / "k.deb"
    subprocess.run(["dpkg-deb", "--build", str(root), str(deb)], check=True, capture_output=True)
    return deb, fpr


@pytest.fixture
def gnupg_home(tmp_path):
    """The test's GNUPGHOME; the gpg-agent that gpg starts there is stopped afterwards (it daemonizes)."""
    yield tmp_path / "gnupg"
    subprocess.run(["gpgconf", "--kill", "all"], env=dict(os.environ, GNUPGHOME=str(tmp_path / "gnupg")),
                   capture_output=True)


@pytest.mark.skipif(not all(Path(f"/usr/bin/{t}").exists() for t in ("gpg", "dpkg-deb")), reason="needs gpg, dpkg-deb")
def test_cuda_keyring_is_installed_only_with_nvidias_key(tmp_path, gnupg_home):
    deb, fpr = _keyring_deb(tmp_path)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "log"
    (bin_dir / "curl").write_text(f"#!/bin/sh\nwhile [ $# -gt 1 ]; do [ \"$1\" = -o ] && out=$2; shift; done\n"
                                  f"echo \"curl $1\" >> {log}; cp {deb} \"$out\"\n")
    (bin_dir / "dpkg").write_text(f"#!/bin/sh\necho \"dpkg $*\" >> {log}\n")
    for f in bin_dir.iterdir():
        f.chmod(0o755)
    env = dict(os.environ, PATH=f"{bin_dir}:{os.environ['PATH']}", GNUPGHOME=str(gnupg_home))
    url = "https://mirror.example/cuda/debian12/x86_64/cuda-keyring_1.1-1_all.deb?a=1&b=$(id)"
    refused = subprocess.run(["bash", "-c", nvidia_repo.keyring_script(url)], env=env, capture_output=True, text=True)
    assert refused.returncode == 1 and "does not carry exactly the CUDA repository key" in refused.stderr
    assert f"curl {url}" in log.read_text() and "dpkg" not in log.read_text()
    # the key the spec pins (nvidia.driver.repo_fingerprint: a site's mirror) is taken
    ok = subprocess.run(["bash", "-c", nvidia_repo.keyring_script(url, fpr)], env=env, capture_output=True, text=True)
    assert ok.returncode == 0, ok.stderr
    installed = log.read_text().splitlines()[-1]
    assert installed.startswith("dpkg -i /var/tmp/corral-cuda-keyring.") and installed.endswith("/k.deb")
    assert not Path(shlex.split(installed)[2]).exists()  # the download is gone
    assert not list(Path("/tmp").glob("corral-cuda-keyring*"))


@pytest.mark.skipif(not all(Path(f"/usr/bin/{t}").exists() for t in ("gpg", "dpkg-deb")), reason="needs gpg, dpkg-deb")
@pytest.mark.parametrize("dearmor", [True, False], ids=["container-toolkit", "grafana"])
def test_a_vendor_key_file_is_installed_only_when_it_is_the_pinned_key(tmp_path, gnupg_home, dearmor):
    """NVIDIA's container toolkit key (dearmored into a keyring) and Grafana's (kept armored): installed only
    when the downloaded key file holds exactly the pinned primary key (deploy/apt_keys.py)."""
    from corral.deploy.apt_keys import pinned_key_script
    _, fpr = _keyring_deb(tmp_path)
    armored = tmp_path / "key.asc"
    armored.write_bytes(subprocess.run(["gpg", "--armor", "--export", fpr], env=dict(os.environ, GNUPGHOME=str(
        gnupg_home)), capture_output=True, check=True).stdout)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "curl").write_text(f"#!/bin/sh\nwhile [ $# -gt 1 ]; do [ \"$1\" = -o ] && out=$2; shift; done\n"
                                  f"cp {armored} \"$out\"\n")
    (bin_dir / "curl").chmod(0o755)
    env = dict(os.environ, PATH=f"{bin_dir}:{os.environ['PATH']}")
    dest = tmp_path / "keyrings" / "vendor.key"
    refused = subprocess.run(["bash", "-c", pinned_key_script("https://x.example/gpgkey", str(dest), "AB" * 20,
                                                              "the vendor key", dearmor)], env=env, capture_output=True,
                             text=True)
    assert refused.returncode == 1 and f"the vendor key: the downloaded key is not exactly {'AB' * 20}" in refused.stderr
    assert not dest.exists() and not dest.parent.exists()
    ok = subprocess.run(["bash", "-c", pinned_key_script("https://x.example/gpgkey", str(dest), fpr, "the vendor key",
                                                         dearmor)], env=env, capture_output=True, text=True)
    assert ok.returncode == 0, ok.stderr
    data = dest.read_bytes()
    assert data.startswith(b"-----BEGIN PGP PUBLIC KEY BLOCK") != dearmor  # a binary keyring when dearmored
    assert not list(Path("/var/tmp").glob("corral-key.*"))


def test_enroot_paths_written_out_with_their_placeholders_are_accepted():
    c = loads('nvidia: {enroot: {version: 3.5.0, sha256: skip, runtime_path: "/run/enroot/user-$(id -u)", '
              'cache_path: "/var/lib/enroot/cache/group-$(id -g)", data_path: "/tmp/enroot-data/user-$(id -u)"}}\n')
    assert c.spec.nvidia.enroot.runtime_path == "/run/enroot/user-$(id -u)"
    assert any("one line" in f or "absolute path" in f or "only $(id -u)" in f
               for f in problems('nvidia: {enroot: {version: 3.5.0, sha256: skip, data_path: "/tmp/x y/$(id -u)"}}\n'))
    assert any("only $(id -u) and $(id -g)" in f
               for f in problems('nvidia: {enroot: {version: 3.5.0, sha256: skip, data_path: "/tmp/$(id)"}}\n'))
