"""NVIDIA's CUDA network repository (the driver, DCGM, dcgm-exporter, the CUDA toolkit): on
Debian/Ubuntu the cuda-keyring package from `<repo_url>/<distro>/<arch>/`, then an apt refresh. Set up once per
node and run, however many components ask for it. The keyring must hold exactly NVIDIA's key, or the
one `nvidia.driver.repo_fingerprint` names (a site's re-signed mirror). With `packages.source: bundle`
nothing is set up: the bundle's repository carries those packages (bundle/vendor.py)."""

from __future__ import annotations

from pyinfra import host
from pyinfra.api import operation
from pyinfra.facts.server import Arch, LinuxDistribution

from corral.engine import run_context
from corral.engine.notes import annotate
from corral.deploy.nodestate import Want, register, snapshot
from corral.engine.shell import cmd, q, sh
from corral.render import apt
from corral.render.nvidia import CUDA_KEY_FINGERPRINT, KEYRING_DEB, fingerprint_of  # noqa: F401 - re-exported


def key_refused(fingerprint: str) -> str:
    return f"cuda-keyring: the package does not carry exactly the CUDA repository key {fingerprint}; nothing installed"


KEY_REFUSED = key_refused(CUDA_KEY_FINGERPRINT)
SUPPORTED = {("debian", "12"): "debian12", ("debian", "13"): "debian13", ("ubuntu", "22.04"): "ubuntu2204",
             ("ubuntu", "24.04"): "ubuntu2404"}
ARCHES = {"x86_64": "x86_64", "amd64": "x86_64", "aarch64": "sbsa", "arm64": "sbsa"}


def repo_path(distro_id: str, version: str, arch: str) -> str:
    """('ubuntu', '22.04', 'x86_64') -> 'ubuntu2204/x86_64'; a clear error for anything else."""
    key = (distro_id.lower(), version if distro_id.lower() == "ubuntu" else version.split(".")[0])
    if key not in SUPPORTED or arch not in ARCHES:
        supported = ", ".join(f"{d} {v}" for d, v in SUPPORTED)
        raise ValueError(f"NVIDIA's CUDA repository is set up by corral for {supported} on x86_64/arm64 "
                         f"only; this node runs {distro_id} {version} on {arch}")
    return f"{SUPPORTED[key]}/{ARCHES[arch]}"


register(Want(packages=("cuda-keyring",)))  # in every node's one snapshot


def _first_in_run() -> bool:
    """True the first time a component asks for the repository on this node in this run."""
    done = run_context.current().cuda_repo_asked
    first = host.name not in done
    done.add(host.name)
    return first


@operation()
def cuda_repository(repo_url: str, want: Want):
    """Install cuda-keyring (NVIDIA's signing key and apt source) unless it is installed."""
    snap = snapshot(want)
    cluster = host.data.corral_cluster
    if cluster.spec.packages.source == "bundle":
        host.noop("NVIDIA CUDA repository: not used (its packages come from the bundle's repository)")
        return
    dist = host.get_fact(LinuxDistribution)
    meta = dist.get("release_meta") or {}
    if "cuda-keyring" in snap.packages or not _first_in_run():
        host.noop("NVIDIA CUDA repository configured (cuda-keyring installed)")
        return
    path = repo_path(meta.get("ID", dist.get("name") or "?"), meta.get("VERSION_ID", str(dist.get("major"))),
                     host.get_fact(Arch))
    url = f"{repo_url.rstrip('/')}/{path}/{KEYRING_DEB}"
    fingerprint = fingerprint_of(cluster, path.split("/")[0])
    annotate(disruption="none", diff=f"apt source: {repo_url.rstrip('/')}/{path}/ (signed by cuda-keyring, "
                                     f"key {fingerprint})\n")
    yield sh(keyring_script(url, fingerprint))
    yield cmd("env", "DEBIAN_FRONTEND=noninteractive", "apt-get", "update", "-q")


def keyring_script(url: str, fingerprint: str = CUDA_KEY_FINGERPRINT) -> str:
    """Download cuda-keyring into a private temp dir (never a fixed /tmp name), install it only if the
    keyring it carries holds exactly the pinned key (NVIDIA's CUDA signing key unless the spec names a
    mirror's), remove the download."""
    return "\n".join([
        "set -eu", "tmp=$(mktemp -d /var/tmp/corral-cuda-keyring.XXXXXX); trap 'rm -rf \"$tmp\"' EXIT",
        f"command -v gpg >/dev/null || {apt.install_script(['gpg'])}",
        f"curl -fsSL --proto '=https,http' --retry 3 --max-time 120 -o \"$tmp/k.deb\" {q(url)}",
        "dpkg-deb -x \"$tmp/k.deb\" \"$tmp/x\"",
        "fprs=$(for f in \"$tmp\"/x/usr/share/keyrings/*.gpg; do gpg --show-keys --with-colons \"$f\"; done "
        "2>/dev/null | awk -F: '$1 == \"fpr\" {print $10}' | sort -u)",
        f"if [ \"$fprs\" != {q(fingerprint)} ]; then echo {q(key_refused(fingerprint))} >&2; exit 1; fi",
        "dpkg -i \"$tmp/k.deb\"", ""])
