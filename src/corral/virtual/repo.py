"""corral's local package repository: .debs the node image lacks, indexed, served on the bridge only.

Dependencies are resolved against the node image's dpkg status (not the host's), so nothing is
missed. One repository per OS release (spec `nodes[].os`): Debian 12's from the host's apt sources (the
path it always had), another release's from a private apt configuration of that release
(virtual/apt_release.py). Each is cumulative and cached.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from corral.bundle.resolve import download_debs, index
from corral.errors import HostToolError
from corral.virtual.host import run, say
from corral.spec.releases import DEFAULT, release
from corral.virtual.image import CACHE, apt_options

REPO = CACHE / "repo"  # the default release's (debian-12); repo_dir() names the others'


def repo_dir(os_name: str | None = None, cache: Path = CACHE) -> Path:
    """The repository of release `os_name`: Debian 12's where it always was, another beside it by suite."""
    rel = release(os_name)
    return cache / "repo" if rel.name == DEFAULT else cache / f"repo-{rel.suite}"


def _have(repo: Path) -> set[str]:
    manifest = repo / "corral-packages.txt"
    return set(manifest.read_text().split()) if manifest.is_file() else set()


def ensure_repo(image: Path, packages: list[str], repo: Path = REPO, os_name: str | None = None) -> Path:
    """Make sure `repo` holds `packages` and everything they need beyond `image` (a base image of release
    `os_name`, whose archive they come from); index it."""
    have = _have(repo)
    if set(packages) <= have and (repo / "Packages").is_file():
        return repo
    say(f"fetching {len(packages)} packages (+ dependencies) into the local repository {repo}")
    options = apt_options(release(os_name)) if release(os_name).name != DEFAULT else []
    download_debs(image / "var/lib/dpkg/status", packages, repo / "pool", repo / "aptstate", options)
    index(repo)
    (repo / "corral-packages.txt").write_text("\n".join(sorted(have | set(packages))) + "\n")
    return repo


def ensure_wheels(requirements: list[str], repo: Path = REPO) -> Path:
    """Python wheels for the nodes' users, served with the .debs at http://HOST:PORT/wheels/ (nodes install
    with `pip install --no-index --trusted-host HOST --find-links URL NAME`): downloaded by the control
    host, the only host that reaches PyPI. Cached: a requirement already downloaded is not fetched again."""
    wheels = repo / "wheels"
    wheels.mkdir(parents=True, exist_ok=True)
    done = wheels / "corral-requirements.txt"
    have = set(done.read_text().split()) if done.is_file() else set()
    missing = [r for r in requirements if r not in have]
    if missing:
        say(f"downloading Python wheels for the nodes: {', '.join(missing)}")
        run([sys.executable, "-I", "-m", "pip", "download", "-q", "--only-binary=:all:", "-d", str(wheels), *missing],
            what="pip download on the control host")
        done.write_text("\n".join(sorted(have | set(missing))) + "\n")
    return wheels


def start_server(repo: Path, address: str, port: int, log: Path) -> int:
    """Serve `repo` over HTTP on address:port only; returns the server's PID (recorded by the caller)."""
    import socket
    try:  # a server left by an earlier run would answer in place of this one: said, never used
        socket.create_connection((address, port), timeout=0.3).close()
        raise HostToolError(f"something already listens on {address}:{port} (a server an earlier run left?)",
                            value=f"{address}:{port}", fix="stop it (`ss -ltnp` names its process), or use another port")
    except OSError:
        pass
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            [sys.executable, "-I", "-m", "http.server", "--bind", address, "--directory", str(repo), str(port)],
            stdin=subprocess.DEVNULL, stdout=out, stderr=out, start_new_session=True)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise HostToolError(f"repository server exited (rc={proc.returncode}); see {log}",
                                value=f"{address}:{port}", fix="free the port or set virtual.repo_port")
        try:
            socket.create_connection((address, port), timeout=0.2).close()
            return proc.pid
        except OSError:
            time.sleep(0.05)
    raise HostToolError(f"repository server did not listen on {address}:{port}; see {log}")


def stop_server(pid: int) -> None:
    """Stop the server we started, by its recorded PID (checked to still be our http.server)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return
    if b"http.server" in cmdline:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            try:  # our child (this process started it): reaped; another process's: gone from /proc
                if os.waitpid(pid, os.WNOHANG)[0] == pid:
                    return
            except ChildProcessError:
                if not Path(f"/proc/{pid}").exists():
                    return
            time.sleep(0.05)
