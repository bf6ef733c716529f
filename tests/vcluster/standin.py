"""TEST stand-in packages for NVIDIA's (never a real NVIDIA package in the virtual cluster):
`corral-test-nvidia-driver` at any version, built with dpkg-deb into a test repository beside
corral's local repository, served on the virtual bridge only. It installs one file, the version
the virtual node's emulated driver "loads" at its next boot (see corral/virtual/gpu.py);
the version "1.2" is built broken (the emulated driver then fails to load); a version built
with broken="marker" is broken only on a node where BREAK_MARKER exists (its postinst says so)."""

from __future__ import annotations

import contextlib
import gzip
import subprocess
from pathlib import Path

PACKAGE = "corral-test-nvidia-driver"


BREAK_MARKER = "/etc/corral-test-break-driver"


def build_deb(out: Path, version: str, broken: bool | str = False) -> Path:
    """broken: True (everywhere), False, or "marker" (only on nodes with BREAK_MARKER)."""
    root = out / f"build-{version}"
    (root / "DEBIAN").mkdir(parents=True, exist_ok=True)
    (root / "DEBIAN" / "control").write_text(
        f"Package: {PACKAGE}\nVersion: {version}-1\nArchitecture: all\nMaintainer: corral tests <root@localhost>\n"
        "Section: misc\nPriority: optional\n"
        "Description: corral TEST stand-in for an NVIDIA driver package\n"
        " Installs no driver: a version file read by the virtual cluster's emulated nvidia-smi.\n")
    lib = root / "usr/lib" / PACKAGE
    lib.mkdir(parents=True, exist_ok=True)
    (lib / "version").write_text(("broken" if broken is True else version) + "\n")
    if broken == "marker":
        post = root / "DEBIAN" / "postinst"
        post.write_text(f"#!/bin/sh\nset -e\n# TEST stand-in: broken on this node only\n"
                        f"if [ -e {BREAK_MARKER} ]; then echo broken > /usr/lib/{PACKAGE}/version; fi\n")
        post.chmod(0o755)
    deb = out / "pool" / f"{PACKAGE}_{version}-1_all.deb"
    deb.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(["dpkg-deb", "--root-owner-group", "-b", str(root), str(deb)], check=True, capture_output=True)
    return deb


def build_repo(out: Path, versions: dict[str, bool | str]) -> Path:
    """versions: {"1.0": False, "1.2": True (broken), "1.3": "marker"} -> a flat apt repository in `out`."""
    return index_repo(out, [build_deb(out, version, broken) for version, broken in versions.items()])


TOOL = "corral-test-tool"


def build_tool_deb(out: Path, version: str, asks_reboot: bool = False) -> Path:
    """A TEST stand-in for an OS package upgrade: `corral-test-tool` installs one file; `asks_reboot`: its
    postinst asks for a reboot (/var/run/reboot-required, as Debian's kernel packages do)."""
    root = out / f"build-tool-{version}"
    (root / "DEBIAN").mkdir(parents=True, exist_ok=True)
    (root / "DEBIAN" / "control").write_text(
        f"Package: {TOOL}\nVersion: {version}-1\nArchitecture: all\nMaintainer: corral tests <root@localhost>\n"
        "Section: misc\nPriority: optional\nDescription: corral TEST stand-in for an OS package upgrade\n"
        " Installs a version file; its maintainer script can ask for a reboot.\n")
    (root / "usr/lib" / TOOL).mkdir(parents=True, exist_ok=True)
    (root / "usr/lib" / TOOL / "version").write_text(version + "\n")
    if asks_reboot:
        post = root / "DEBIAN" / "postinst"
        post.write_text("#!/bin/sh\n# corral TEST stand-in\ntouch /var/run/reboot-required\nexit 0\n")
        post.chmod(0o755)
    deb = out / "pool" / f"{TOOL}_{version}-1_all.deb"
    deb.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(["dpkg-deb", "--root-owner-group", "-b", str(root), str(deb)], check=True, capture_output=True)
    return deb


def index_repo(out: Path, debs: list[Path]) -> Path:
    """Packages(.gz) of `out` listing exactly `debs` (a repository offering only those versions)."""
    names = {d.name for d in debs}
    index = subprocess.run(["dpkg-scanpackages", "--multiversion", "pool", "/dev/null"], cwd=out, check=True,
                           capture_output=True, text=True).stdout
    kept = [e for e in index.split("\n\n") if e.strip() and any(f"Filename: pool/{n}" in e for n in names)]
    text = "\n\n".join(kept) + "\n"
    (out / "Packages").write_text(text)
    (out / "Packages.gz").write_bytes(gzip.compress(text.encode()))
    return out


ENROOT = "corral-test-enroot"
PYXIS = "corral-test-pyxis"


ENROOT_SCRIPT = r"""#!/bin/sh
# corral TEST stand-in for enroot (never shipped). `version`, `config`, and `create`: enroot's
# `create [--name NAME] IMAGE.sqsh` unpacks a squashfs image (Debian's unsquashfs, as enroot does) into
# ENROOT_DATA_PATH/NAME, read from /etc/enroot/enroot.conf and evaluated in the user's shell as enroot
# does; unlike enroot it prints the container's root path (the stand-in pyxis enters it). No imports
# from registries, no `start`: the stand-in pyxis enters the unpacked root itself.
set -eu
err() { echo "enroot: [ERROR] $*" >&2; exit 1; }
setting() {
    v=$(sed -n "s/^$1[[:space:]][[:space:]]*//p" /etc/enroot/enroot.conf | tail -n 1)
    eval "printf '%s' \"$v\""
}
case "${1-}" in
  version) echo @VERSION@ ;;
  config) cat /etc/enroot/enroot.conf ;;
  create)
    shift; name=
    while [ $# -gt 0 ]; do
        case $1 in -n|--name) name=$2; shift 2 ;; --) shift; break ;; -*) err "unknown option: $1" ;; *) break ;; esac
    done
    [ $# -eq 1 ] || err "usage: enroot create [--name NAME] IMAGE"
    image=$1
    [ -f "$image" ] || err "No such file or directory: $image"
    [ -n "$name" ] || name=$(basename "$image" .sqsh)
    case $name in */*|.*|"") err "Invalid container name: $name" ;; esac
    data=${ENROOT_DATA_PATH:-$(setting ENROOT_DATA_PATH)}  # the environment first, as enroot
    [ -d "$data" ] && [ -w "$data" ] || err "the data directory $data is missing or not writable (ENROOT_DATA_PATH)"
    rootfs=$data/$name
    [ ! -e "$rootfs" ] || err "File already exists: $rootfs"
    command -v unsquashfs >/dev/null || err "unsquashfs (squashfs-tools) is not installed"
    if ! out=$(unsquashfs -no-xattrs -no-progress -d "$rootfs" "$image" 2>&1 >/dev/null); then
        rm -rf "$rootfs"
        err "cannot read the squashfs image $image: $(printf '%s' "$out" | grep . | tail -n 2 | tr '\n' ' ')"
    fi
    echo "$rootfs" ;;
  *) echo 'enroot: corral TEST stand-in: version, config and create only' >&2; exit 1 ;;
esac
"""


def build_enroot_deb(out: Path, version: str) -> Path:
    """A TEST stand-in for NVIDIA's enroot package: an `enroot` that prints its version and config and
    unpacks squashfs images (`create`, ENROOT_SCRIPT), and the system mounts (/proc, /dev) its package ships
    in /etc/enroot/mounts.d (the stand-in pyxis binds them)."""
    root = out / f"build-enroot-{version}"
    (root / "DEBIAN").mkdir(parents=True, exist_ok=True)
    (root / "DEBIAN" / "control").write_text(
        f"Package: {ENROOT}\nVersion: {version}-1\nArchitecture: all\nMaintainer: corral tests <root@localhost>\n"
        "Section: misc\nPriority: optional\nDescription: corral TEST stand-in for NVIDIA's enroot package\n"
        " Starts no container: `enroot version`, `enroot config`, `enroot create` (unsquashfs) only.\n")
    (root / "usr/bin").mkdir(parents=True, exist_ok=True)
    tool = root / "usr/bin/enroot"
    tool.write_text(ENROOT_SCRIPT.replace("@VERSION@", version))
    tool.chmod(0o755)
    mounts = root / "etc/enroot/mounts.d"  # as enroot's package: the host's /proc and /dev in every container
    mounts.mkdir(parents=True, exist_ok=True)
    (mounts / "10-system.fstab").write_text(
        "# corral TEST stand-in for enroot's system mounts (its package's 10-system.fstab): binds only\n"
        "/proc /proc none x-create=dir,rbind,rw,nosuid,nodev,noexec\n/dev /dev none x-create=dir,rbind,rw,nosuid,noexec\n")
    deb = out / f"{ENROOT}_{version}_amd64.deb"  # named as the spec's url template asks ({arch})
    subprocess.run(["dpkg-deb", "--root-owner-group", "-b", str(root), str(deb)], check=True, capture_output=True)
    return deb


def build_pyxis_source(out: Path, version: str) -> Path:
    """A TEST stand-in for pyxis' release tarball (tests/vcluster/standin_pyxis: a real SPANK plugin)."""
    import tarfile
    src = Path(__file__).parent / "standin_pyxis"
    tarball = out / f"{PYXIS}-{version}.tar.gz"
    with tarfile.open(tarball, "w:gz") as tar:
        for f in sorted(src.iterdir()):
            tar.add(f, arcname=f"{PYXIS}-{version}/{f.name}")
    return tarball


def build_cuda_repo(site: Path, debs: list[Path], key_state: Path) -> str:
    """A TEST stand-in for NVIDIA's CUDA repository at `site` (the spec's nvidia.driver.repo_url): the flat
    repository debian12/x86_64/ holding `debs`, its Release clearsigned (InRelease) by a test key made in
    `key_state` (never NVIDIA's), and a cuda-keyring .deb carrying that key, as NVIDIA's does. Returns the
    key's fingerprint (the spec's nvidia.driver.repo_fingerprint, as for a site's re-signed mirror)."""
    from corral.bundle import sign
    home, fpr = _signed_flat_repo(site / "debian12" / "x86_64", debs, key_state, "NVIDIA's CUDA repository")
    top = site / "debian12" / "x86_64"
    root = site / "build-keyring"
    (root / "DEBIAN").mkdir(parents=True, exist_ok=True)
    (root / "DEBIAN" / "control").write_text(
        "Package: cuda-keyring\nVersion: 1.1-1\nArchitecture: all\nMaintainer: corral tests <root@localhost>\n"
        "Description: corral TEST stand-in for NVIDIA's cuda-keyring\n Carries a test key, not NVIDIA's.\n")
    (root / "usr/share/keyrings").mkdir(parents=True, exist_ok=True)
    (root / "usr/share/keyrings/cuda-archive-keyring.gpg").write_bytes(sign.export_public(home, fpr))
    subprocess.run(["dpkg-deb", "--root-owner-group", "-b", str(root), str(top / "cuda-keyring_1.1-1_all.deb")],
                   check=True, capture_output=True)
    return fpr


CUDA_TOOLKIT_VERSION = "12.4"


def build_cuda_toolkit_deb(out: Path, version: str = CUDA_TOOLKIT_VERSION) -> Path:
    """A TEST stand-in for NVIDIA's cuda-toolkit-X-Y (never NVIDIA's): /usr/local/cuda-X.Y as the real
    package lays it out (bin/, lib64/, version.json), with an `nvcc` that compiles nothing and says so."""
    name = "cuda-toolkit-" + version.replace(".", "-")
    root = out / f"build-{name}"
    (root / "DEBIAN").mkdir(parents=True, exist_ok=True)
    (root / "DEBIAN" / "control").write_text(
        f"Package: {name}\nVersion: {version}.0-1\nArchitecture: amd64\nMaintainer: corral tests <root@localhost>\n"
        "Section: misc\nPriority: optional\nDescription: corral TEST stand-in for NVIDIA's CUDA toolkit\n"
        " Installs the toolkit's layout and an nvcc that only prints its version.\n")
    home = root / f"usr/local/cuda-{version}"
    (home / "bin").mkdir(parents=True, exist_ok=True)
    (home / "lib64").mkdir(parents=True, exist_ok=True)
    (home / "version.json").write_text(f'{{"cuda": {{"name": "CUDA SDK", "version": "{version}.0"}}}}\n')
    nvcc = home / "bin/nvcc"
    nvcc.write_text("#!/bin/sh\n# corral TEST stand-in for NVIDIA's nvcc: compiles nothing\n"
                    f"echo 'nvcc: corral TEST stand-in, Cuda compilation tools, release {version}, V{version}.0'\n")
    nvcc.chmod(0o755)
    deb = out / f"{name}_{version}.0-1_amd64.deb"
    subprocess.run(["dpkg-deb", "--root-owner-group", "-b", str(root), str(deb)], check=True, capture_output=True)
    return deb


def _signed_flat_repo(top: Path, debs: list[Path], key_state: Path, what: str):
    """A flat apt repository at `top` holding `debs`, its Release clearsigned by a test key made in key_state."""
    import hashlib
    import shutil
    from corral.bundle import sign
    home, fpr = sign.ensure_key(key_state, f"{what} stand-in")
    (top / "pool").mkdir(parents=True, exist_ok=True)
    for deb in debs:
        shutil.copy(deb, top / "pool" / deb.name)
    index_repo(top, [top / "pool" / d.name for d in debs])
    sums = "".join(f" {hashlib.sha256((top / f).read_bytes()).hexdigest()} {(top / f).stat().st_size} {f}\n"
                   for f in ("Packages", "Packages.gz"))
    release = f"Origin: corral tests\nLabel: TEST stand-in for {what}\nSHA256:\n{sums}"
    (top / "Release").write_text(release)
    (top / "InRelease").write_bytes(sign.sign(home, fpr, release.encode(), clear=True))
    return home, fpr


def build_ctk_repo(site: Path, debs: list[Path], key_state: Path) -> str:
    """A TEST stand-in for NVIDIA's container toolkit repository at `site` (nvidia.container_toolkit.repo_url):
    stable/deb/amd64/ (flat, signed by a test key) and the ASCII-armored key at `site`/gpgkey, as NVIDIA serves
    it. Returns the key's fingerprint."""
    from corral.bundle import sign
    home, fpr = _signed_flat_repo(site / "stable" / "deb" / "amd64", debs, key_state,
                                  "NVIDIA's container toolkit repository")
    with sign._short(home) as work:
        (site / "gpgkey").write_bytes(sign._gpg(work, "--armor", "--export", fpr).stdout)
    return fpr


def build_plain_deb(out: Path, package: str, version: str) -> Path:
    """A TEST stand-in .deb named as a vendor's package (installs one file saying so)."""
    root = out / f"build-{package}-{version}"
    (root / "DEBIAN").mkdir(parents=True, exist_ok=True)
    (root / "DEBIAN" / "control").write_text(
        f"Package: {package}\nVersion: {version}\nArchitecture: all\nMaintainer: corral tests <root@localhost>\n"
        f"Description: corral TEST stand-in named {package}\n Installs a note, nothing of the vendor's.\n")
    (root / "usr/share/doc" / package).mkdir(parents=True, exist_ok=True)
    (root / "usr/share/doc" / package / "corral-test-stand-in").write_text("corral TEST stand-in\n")
    deb = out / f"{package}_{version}_all.deb"
    out.mkdir(parents=True, exist_ok=True)
    subprocess.run(["dpkg-deb", "--root-owner-group", "-b", str(root), str(deb)], check=True, capture_output=True)
    return deb


@contextlib.contextmanager
def serve_dir(directory: Path, port: int = 0):
    """A download site on loopback serving `directory` (a vendor's repository, a release page) for the build
    host only; its base URL. Gone when the block ends."""
    import functools
    import http.server
    import threading
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(directory))
    handler.log_message = lambda *a: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", port), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
