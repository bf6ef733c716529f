"""Cached Debian base image for virtual nodes (debootstrap once; rebuilt when the recipe changes).

The image is cluster-independent: per-node identity, addresses, keys and apt sources go in each
node's overlay upper layer (see node.py).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from pathlib import Path

from corral.errors import HostToolError
from corral.spec.releases import Release, release as os_release
from corral.virtual.host import debian_mirror, run, say

SUITE = "bookworm"  # the default release's (spec/releases.py DEFAULT); every function takes `os_name` for another
INCLUDE = ["systemd", "systemd-sysv", "dbus", "openssh-server", "iproute2", "python3",
           "ca-certificates", "procps", "less", "sudo"]
RECIPE_VERSION = 6  # bump when configure() or the build changes (6: the release's updates applied, its status kept)
CACHE = Path("/var/cache/corral")
RELEASE_STATUS = "var/lib/corral-image/release-status"
UPDATE_TIMEOUT_S = 1800  # installing the release's updates in the image (a few hundred MB at most)

APT_CONF = """\
APT::Install-Recommends "false";
APT::Install-Suggests "false";
Acquire::Languages "none";
Acquire::http::Timeout "5";
Acquire::Retries "1";
"""


def recipe(os_name: str | None = None) -> dict:
    """The build recipe of release `os_name`'s image (spec `nodes[].os`; None: debian-12): the same for every release
    but its suite, so Debian 12's recipe, hash and cached image are what they were before releases."""
    return {"suite": os_release(os_name).suite, "variant": "minbase", "include": INCLUDE, "version": RECIPE_VERSION,
            "updated": True}


def recipe_hash(os_name: str | None = None) -> str:
    return hashlib.sha256(json.dumps(recipe(os_name), sort_keys=True).encode()).hexdigest()[:12]


def image_dir(cache: Path | None = None, os_name: str | None = None) -> Path:
    return (cache or CACHE) / "images" / f"{os_release(os_name).suite}-{recipe_hash(os_name)}"


def apt_options(rel: Release, cache: Path | None = None) -> list[str]:
    """apt options reaching `rel`'s archive: none for the host's own release, a private configuration
    under the cache for another (virtual/apt_release.py)."""
    from corral.virtual.apt_release import options
    return options(rel, (cache or CACHE) / "apt" / rel.suite)


def configure(root: Path, os_name: str | None = None) -> None:
    """Make a debootstrapped tree a bootable, quiet, offline nspawn node image."""
    def systemctl(*args: str) -> None:
        run(["systemctl", f"--root={root}", *args], what="systemctl in image", check=False)

    systemctl("enable", "systemd-networkd.service")
    # network-online.target means what it means on a real node: host0's address is configured (services
    # that bind it are ordered after it, render/restart.py); host0 is networkd's only link, ready in ms
    systemctl("enable", "systemd-networkd-wait-online.service")
    # background apt/cleanup jobs grab the dpkg lock in the middle of deploys
    systemctl("disable", "apt-daily.timer", "apt-daily-upgrade.timer", "e2scrub_reap.service")
    systemctl("mask", "apt-daily.timer", "apt-daily-upgrade.timer")
    (root / "etc/machine-id").write_text("")
    for key in (root / "etc/ssh").glob("ssh_host_*"):
        key.unlink()
    (root / "etc/ssh/sshd_config.d").mkdir(parents=True, exist_ok=True)
    (root / "etc/ssh/sshd_config.d/corral.conf").write_text(
        "HostKey /etc/ssh/ssh_host_ed25519_key\nPasswordAuthentication no\n"
        "KbdInteractiveAuthentication no\nPermitRootLogin prohibit-password\nUseDNS no\n")
    (root / "etc/apt/apt.conf.d/90corral").write_text(APT_CONF)
    # nodes get packages only from corral's repository (written per node); drop the mirror
    (root / "etc/apt/sources.list").write_text("")
    for f in (root / "etc/apt/sources.list.d").glob("*"):
        f.unlink()
    shutil.rmtree(root / "var/lib/apt/lists", ignore_errors=True)
    (root / "var/lib/apt/lists/partial").mkdir(parents=True)
    for f in (root / "var/cache/apt").glob("*.bin"):
        f.unlink()
    (root / "etc/hosts").write_text("127.0.0.1 localhost\n::1 localhost ip6-localhost ip6-loopback\n")
    (root / "etc/corral-image").write_text(json.dumps(recipe(os_name), sort_keys=True) + "\n")


def release_status(image: Path) -> Path:
    """The dpkg status of a node installed from the release as it shipped (before the image's updates):
    an air-gap bundle resolves its packages against it, so it carries the updated base packages a node
    without those updates needs."""
    kept = image / RELEASE_STATUS
    return kept if kept.is_file() else image / "var/lib/dpkg/status"


def installed(root: Path) -> list[str]:
    """The packages installed in a tree, from its dpkg status."""
    names, name = [], None
    for line in (root / "var/lib/dpkg/status").read_text().splitlines():
        if line.startswith("Package: "):
            name = line.split(": ", 1)[1]
        elif line.startswith("Status: ") and line.endswith(" installed") and name:
            names.append(name)
    return names


def apply_updates(root: Path, options: list[str] = ()) -> None:
    """debootstrap installs the release as it shipped; a server is kept at its security and stable
    updates. Take them from the host's apt sources (the suite's -updates and -security where the host
    has them), as the local repository's packages come from there: without it, a deploy that needs a
    package whose updated version depends on an updated base package (perl on perl-base) upgrades the
    base package on every node in every run. Services do not start (a policy-rc.d while it runs).
    `options`: apt options reaching another release than the host's (apt_options)."""
    from corral.bundle.resolve import download_debs
    kept = root / RELEASE_STATUS  # what a node installed from the release's media has: bundles resolve against it
    kept.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(root / "var/lib/dpkg/status", kept)
    work = root.with_name(root.name + ".updates")
    shutil.rmtree(work, ignore_errors=True)
    pool = root / "var/cache/apt/archives/corral-updates"
    download_debs(root / "var/lib/dpkg/status", installed(root), pool, work, options=[*options, "--only-upgrade"])
    debs = sorted(pool.glob("*.deb"))
    if debs:
        say(f"applying {len(debs)} updates of the release to the base image")
        policy = root / "usr/sbin/policy-rc.d"
        policy.write_text("#!/bin/sh\nexit 101\n")
        policy.chmod(0o755)
        try:
            run(["timeout", str(UPDATE_TIMEOUT_S), "chroot", str(root), "apt-get", "install", "-y", "-q", "--no-install-recommends",
                 "-o", "Dpkg::Options::=--force-confold", *(f"/{d.relative_to(root)}" for d in debs)],
                what="the release's updates installed in the base image (apt-get in a chroot)",
                env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"})
        finally:
            policy.unlink()
    shutil.rmtree(pool, ignore_errors=True)
    shutil.rmtree(work, ignore_errors=True)


def ensure_image(cache: Path | None = None, carried: Path | None = None, os_name: str | None = None) -> Path:
    """Return the base image directory of release `os_name` (None: debian-12), building it first if this recipe
    has none yet: from `carried` (a bundle's virtual/<image>.tar, already checked against its signed sums)
    when given, else debootstrap (Debian 12's debootstrap builds a trixie minbase as well)."""
    rel = os_release(os_name)
    target = image_dir(cache, os_name)
    if (target / "etc/corral-image").is_file():
        return target
    if carried is not None:
        return import_image(carried, target)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(target.name + ".building")
    if tmp.exists():
        shutil.rmtree(tmp)
    options = apt_options(rel, cache)
    from corral.virtual.apt_release import mirrors
    mirror = debian_mirror(rel.suite) if not options else mirrors(rel.suite)[0]
    say(f"building the node base image (debian {rel.suite}, once; about a minute) in {target}")
    t0 = time.monotonic()
    run(["debootstrap", "--variant=minbase", f"--include={','.join(INCLUDE)}", rel.suite, str(tmp), mirror],
        what="debootstrap of the node base image")
    apply_updates(tmp, options)
    configure(tmp, os_name)
    tmp.rename(target)
    say(f"base image ready in {time.monotonic() - t0:.0f} s")
    return target


def import_image(carried: Path, target: Path) -> Path:
    """Unpack a bundle's base image (owners, modes, links and device nodes as they were) into `target`
    through bundle/untar.py (every member checked first: no name outside the image, nothing written through
    a link of the archive, device nodes under dev/ only), then rename it into place complete."""
    from corral.bundle.untar import unpack
    tmp = target.with_name(target.name + ".building")
    if tmp.exists():
        shutil.rmtree(tmp)
    say(f"unpacking the node base image from the bundle into {target}")
    try:
        unpack(carried, tmp, rootfs=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    if not (tmp / "etc/corral-image").is_file():
        shutil.rmtree(tmp, ignore_errors=True)
        raise HostToolError(f"{carried.name} is not a corral node base image (no /etc/corral-image)",
                            fix="build the bundle again with corral bundle build --with-virtual")
    tmp.rename(target)
    return target
