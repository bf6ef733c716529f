"""Packages from NVIDIA's CUDA repository in a bundle: the driver (and its Fabric Manager), DCGM,
dcgm-exporter, the CUDA toolkit and NCCL, where the spec asks for them (render/packages.py
`cuda_repo_packages`).

At build time the repository is added to a private apt configuration, beside the build host's own
sources and never in them: cuda-keyring is fetched from `<nvidia.driver.repo_url>/debian12/x86_64/`,
its keyring must hold exactly the pinned key (NVIDIA's, or `nvidia.driver.repo_fingerprint` for a
site's re-signed mirror; deploy/nvidia_repo.py checks the same on nodes), apt refreshes that one source
into a private lists directory (the host's lists are linked in, not copied or changed), and the spec's
packages are resolved against both with the driver pinned as the nodes pin it (render/nvidia.py
`pin_text`). The .debs then sit in the bundle's one signed repository like every other package.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from corral.errors import HostToolError

SOURCE_PATH = "debian12/x86_64"  # the bundle's release and architecture in NVIDIA's layout (nvidia_repo.repo_path)
APT_TIMEOUT_S = 600


@dataclass(frozen=True)
class CudaRepo:
    url: str                      # the flat repository: <repo_url>/debian12/x86_64/
    fingerprint: str              # the key its Release must be signed with
    packages: dict[str, list[str]]  # apt request ("pkg" or "pkg=version") -> why
    pin: str                      # apt preferences: the driver held at the spec's version ("" without a driver)

    @property
    def keyring_url(self) -> str:
        from corral.render.nvidia import KEYRING_DEB
        return self.url + KEYRING_DEB


def cuda_repo(cluster) -> CudaRepo | None:
    """NVIDIA's CUDA repository as the spec's bundle uses it (None: the spec takes nothing from it)."""
    from corral.render.nvidia import driver_nodes, fingerprint_of, driver_package, pin_text
    from corral.render.packages import cuda_repo_packages
    wanted = cuda_repo_packages(cluster)
    if not wanted:
        return None
    nv = cluster.spec.nvidia
    base = nv.driver.repo_url if nv.driver else cluster.spec.monitoring.dcgm_exporter.repo_url
    pin = ""
    if nv.driver is not None and nv.driver.source == "cuda" and driver_nodes(cluster):
        pin = pin_text(driver_package(nv.driver, driver_nodes(cluster)[0], "debian", "12"), nv.driver.version,
                       nv.driver.package is not None)
    return CudaRepo(f"{str(base).rstrip('/')}/{SOURCE_PATH}/", fingerprint_of(cluster), wanted, pin)


def fetch_keyring(repo: CudaRepo, dest: Path) -> Path:
    """cuda-keyring's keyring at dest/cuda.gpg, refused unless it holds exactly the pinned key."""
    from corral.bundle.downloads import _get
    from corral.bundle.sign import _gpg, _stop_agent
    dest.mkdir(parents=True, exist_ok=True)
    deb = dest / "cuda-keyring.deb"
    _get(repo.keyring_url, deb)
    with tempfile.TemporaryDirectory(prefix="corral-keyring-") as tmp:
        x = subprocess.run(["dpkg-deb", "-x", str(deb), tmp], capture_output=True, text=True, timeout=60)
        rings = sorted(Path(tmp, "usr/share/keyrings").glob("*.gpg")) if x.returncode == 0 else []
        if not rings:
            raise HostToolError(f"{repo.keyring_url} is not a cuda-keyring package (no /usr/share/keyrings/*.gpg"
                                f"{': ' + x.stderr.strip()[-160:] if x.returncode else ''})",
                                fix="check nvidia.driver.repo_url: it must point at NVIDIA's CUDA repository "
                                    "or a mirror of it")
        data = b"".join(r.read_bytes() for r in rings)
    home = Path(tempfile.mkdtemp(prefix="corral-gpg-"))
    try:
        out = _gpg(home, "--with-colons", "--show-keys", input=data).stdout.decode()
    finally:
        _stop_agent(home)
        shutil.rmtree(home, ignore_errors=True)
    primaries = re.findall(r"^pub:.*\n(?:^(?!pub:).*\n)*?^fpr:(?:[^:]*:){8}([0-9A-F]{40}):", out, re.M)
    if primaries != [repo.fingerprint]:
        raise HostToolError(f"{repo.keyring_url}: its keyring holds {', '.join(primaries) or 'no key'}, not exactly "
                            f"the CUDA repository key {repo.fingerprint}; nothing was taken from that repository",
                            value=repo.keyring_url,
                            fix="for NVIDIA's repository this means the download was altered; for a site's mirror "
                                "set nvidia.driver.repo_fingerprint to its signing key's fingerprint")
    ring = dest / "cuda.gpg"
    ring.write_bytes(data)
    deb.unlink()
    return ring


def apt_options(repo: CudaRepo, work: Path) -> list[str]:
    """Fetch the keyring, refresh the CUDA source into a private lists directory holding links to the host's
    lists, and return the apt options that resolve against the host's sources plus this one."""
    work = work.resolve()
    ring = fetch_keyring(repo, work / "keyrings")
    parts, only, lists = work / "sources.list.d", work / "cuda-only.d", work / "lists"
    for d in (parts, only, lists / "partial"):
        d.mkdir(parents=True, exist_ok=True)
    line = f"deb [signed-by={ring}] {repo.url} /\n"
    (only / "cuda.list").write_text(line)
    host_parts = Path("/etc/apt/sources.list.d")
    for f in sorted(host_parts.glob("*")) if host_parts.is_dir() else []:
        if f.suffix in (".list", ".sources") and not (parts / f.name).exists():
            (parts / f.name).symlink_to(f)
    (parts / "zz-corral-cuda.list").write_text(line)
    for f in sorted(Path("/var/lib/apt/lists").glob("*")):
        if f.is_file() and f.name != "lock" and not (lists / f.name).exists():
            (lists / f.name).symlink_to(f)
    (work / "preferences").write_text(repo.pin)
    (work / "empty.list").write_text("")
    common = ["-o", f"Dir::State::Lists={lists}", "-o", "APT::Sandbox::User=root",  # a private dir _apt cannot read
              "-o", "Dir::Cache::pkgcache=", "-o", "Dir::Cache::srcpkgcache=",
              "-o", f"Dir::Etc::preferences={work / 'preferences'}",
              "-o", f"Dir::Etc::PreferencesParts={work / 'cuda-only.d'}"]  # no .pref files there: the host's unread
    update = ["apt-get", "-q", "-o", f"Dir::Etc::SourceList={work / 'empty.list'}",
              "-o", f"Dir::Etc::SourceParts={only}", "-o", "APT::Get::List-Cleanup=false", *common, "update"]
    try:
        proc = subprocess.run(update, capture_output=True, text=True, timeout=APT_TIMEOUT_S,
                              env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"})
    except subprocess.TimeoutExpired:
        raise HostToolError(f"apt-get update of {repo.url} did not finish within {APT_TIMEOUT_S} s") from None
    said = proc.stdout + proc.stderr
    if proc.returncode != 0 or re.search(r"^(E:|W: (GPG|The repository|Failed))", said, re.M):
        tail = " | ".join(line for line in said.strip().splitlines()[-4:])
        raise HostToolError(f"apt cannot read the CUDA repository {repo.url}: {tail}",
                            fix="check nvidia.driver.repo_url and this host's access to it; a signature error means "
                                "the repository is not signed by the pinned key")
    return [*common, "-o", f"Dir::Etc::SourceParts={parts}"]
