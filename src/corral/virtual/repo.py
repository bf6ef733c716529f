"""corral's local package repository: .debs the node image lacks, indexed, served on the bridge only.

Dependencies are resolved against the node image's dpkg status (not the host's), so nothing is
missed. Downloads use the host's apt sources; the repository is cumulative and cached.
"""

from __future__ import annotations

import gzip
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from corral.errors import HostToolError
from corral.spec.cluster import Cluster
from corral.virtual.host import run, say
from corral.virtual.image import CACHE

REPO = CACHE / "repo"

# what each role needs on a node; deploys install from these (smoke: the engine smoke deploy)
ROLE_PACKAGES = {
    "*": ["memcached", "curl", "iputils-ping", "python3-apt", "prometheus-node-exporter"],
    "controller": ["slurmctld", "slurm-client", "munge", "python3-prometheus-client"],
    "compute": ["slurmd", "slurm-client", "munge", "libpmix2"],  # + libpam-slurm-adopt (packages_for)
    "login": ["slurm-client", "munge", "python3-venv"],  # users make their venvs there (job clients)
    "accounting": ["slurmdbd", "mariadb-server", "munge"],
    "monitoring": ["prometheus", "prometheus-alertmanager"],
}


def packages_for(cluster: Cluster) -> list[str]:
    wanted = set(ROLE_PACKAGES["*"])
    for node in cluster.nodes:
        for role in node.roles:
            wanted.update(ROLE_PACKAGES.get(role, []))
    from corral.render.containers import BUILD_PACKAGES, FETCH_PACKAGES
    if cluster.spec.nvidia.enroot is not None or cluster.spec.nvidia.pyxis is not None:
        wanted.update(FETCH_PACKAGES)
    if cluster.spec.nvidia.pyxis is not None:  # built on the nodes against the installed Slurm
        wanted.update(BUILD_PACKAGES)
    if cluster.spec.identity.pam_slurm_adopt and cluster.with_role("compute"):
        wanted.add("libpam-slurm-adopt")
    if cluster.spec.identity.ldap is not None:
        from corral.render.sssd import PACKAGES as SSSD_PACKAGES
        wanted.update(SSSD_PACKAGES)
    return sorted(wanted)


def _have(repo: Path) -> set[str]:
    manifest = repo / "corral-packages.txt"
    return set(manifest.read_text().split()) if manifest.is_file() else set()


def ensure_repo(image: Path, packages: list[str], repo: Path = REPO) -> Path:
    """Make sure `repo` holds `packages` and everything they need beyond `image`; index it."""
    have = _have(repo)
    if set(packages) <= have and (repo / "Packages").is_file():
        return repo
    pool = repo / "pool"
    pool.mkdir(parents=True, exist_ok=True)
    state = repo / "aptstate"
    state.mkdir(exist_ok=True)
    shutil.copy(image / "var/lib/dpkg/status", state / "status")
    say(f"fetching {len(packages)} packages (+ dependencies) into the local repository {repo}")
    apt = ["apt-get", "-q", "-o", f"Dir::State::status={state / 'status'}",
           "-o", f"Dir::Cache::archives={pool}", "-o", "Debug::NoLocking=1"]
    lists = Path("/var/lib/apt/lists")
    if not any(lists.glob("*_Packages*")) or time.time() - lists.stat().st_mtime > 7 * 86400:
        run(["apt-get", "update", "-q"], what="apt-get update on the control host", check=False)
    proc = subprocess.run([*apt, "install", "--download-only", "--no-install-recommends", "-y", *packages],
                          capture_output=True, text=True, env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"})
    if proc.returncode != 0:
        tail = " | ".join(proc.stderr.strip().splitlines()[-5:])
        raise HostToolError(f"could not download packages for the local repository: {tail}",
                            fix="check that the host's apt sources work (apt-get update)")
    for junk in ("partial", "lock"):
        p = pool / junk
        shutil.rmtree(p, ignore_errors=True) if p.is_dir() else p.unlink(missing_ok=True)
    index = run(["dpkg-scanpackages", "--multiversion", "pool", "/dev/null"], what="dpkg-scanpackages",
                cwd=repo).stdout
    (repo / "Packages").write_text(index)
    (repo / "Packages.gz").write_bytes(gzip.compress(index.encode(), 9))
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
        run([sys.executable, "-m", "pip", "download", "-q", "--only-binary=:all:", "-d", str(wheels), *missing],
            what="pip download on the control host")
        done.write_text("\n".join(sorted(have | set(missing))) + "\n")
    return wheels


def start_server(repo: Path, address: str, port: int, log: Path) -> int:
    """Serve `repo` over HTTP on address:port only; returns the server's PID (recorded by the caller)."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "http.server", "--bind", address, "--directory", str(repo), str(port)],
            stdin=subprocess.DEVNULL, stdout=out, stderr=out, start_new_session=True)
    deadline = time.monotonic() + 5
    import socket
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
        os.kill(pid, signal.SIGTERM)
