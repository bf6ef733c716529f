"""TEST stand-in packages for NVIDIA's (never a real NVIDIA package in the virtual cluster):
`corral-test-nvidia-driver` at any version, built with dpkg-deb into a test repository beside
corral's local repository, served on the virtual bridge only. It installs one file, the version
the virtual node's emulated driver "loads" at its next boot (see corral/virtual/gpu.py);
the version "1.2" is built broken (the emulated driver then fails to load)."""

from __future__ import annotations

import gzip
import subprocess
from pathlib import Path

PACKAGE = "corral-test-nvidia-driver"


def build_deb(out: Path, version: str, broken: bool = False) -> Path:
    root = out / f"build-{version}"
    (root / "DEBIAN").mkdir(parents=True, exist_ok=True)
    (root / "DEBIAN" / "control").write_text(
        f"Package: {PACKAGE}\nVersion: {version}-1\nArchitecture: all\nMaintainer: corral tests <root@localhost>\n"
        "Section: misc\nPriority: optional\n"
        "Description: corral TEST stand-in for an NVIDIA driver package\n"
        " Installs no driver: a version file read by the virtual cluster's emulated nvidia-smi.\n")
    lib = root / "usr/lib" / PACKAGE
    lib.mkdir(parents=True, exist_ok=True)
    (lib / "version").write_text(("broken" if broken else version) + "\n")
    deb = out / "pool" / f"{PACKAGE}_{version}-1_all.deb"
    deb.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(["dpkg-deb", "--root-owner-group", "-b", str(root), str(deb)], check=True, capture_output=True)
    return deb


def build_repo(out: Path, versions: dict[str, bool]) -> Path:
    """versions: {"1.0": False, "1.2": True (broken)} -> a flat apt repository in `out`."""
    for version, broken in versions.items():
        build_deb(out, version, broken)
    index = subprocess.run(["dpkg-scanpackages", "--multiversion", "pool", "/dev/null"], cwd=out, check=True,
                           capture_output=True, text=True).stdout
    (out / "Packages").write_text(index)
    (out / "Packages.gz").write_bytes(gzip.compress(index.encode()))
    return out
