"""A private sshd on loopback (127.0.0.2:2222 and 127.0.0.3:2222) for engine tests.

If another test run on this machine holds port 2222 (scripts/run-tests.sh runs several unit-test processes at
once), the next free port up to 2231 is used (same loopback addresses); tests read it from `sshd.port`. A
port is claimed by a lock file held while the daemon runs, before it is started: sshd binds whichever of its
addresses it can, so two runs racing for one port would each answer on one of them.

Import the fixtures into a test module: `from conftest_engine import sshd, engine_cluster  # noqa`.
Needs root and /usr/sbin/sshd; the tests are skipped with the reason otherwise. The daemon has its
own generated ed25519 host key, allows root by a generated key only, and is stopped by its PID.
"""

from __future__ import annotations

import fcntl
import os
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

SSHD = "/usr/sbin/sshd"
ADDRESSES = ("127.0.0.2", "127.0.0.3")
DOWN = "127.0.0.4"  # nothing listens there
PORT = 2222  # first choice; the next free one of PORTS if another test run holds it
PORTS = range(2222, 2232)


@dataclass
class Sshd:
    dir: Path
    pid: int
    client_key: Path
    host_pubkey: str  # "ssh-ed25519 AAAA..."
    port: int = PORT


def _keygen(path: Path, comment: str) -> str:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(path)],
                   check=True, capture_output=True)
    return " ".join(path.with_suffix(".pub").read_text().split()[:2])


def _listening(address: str, port: int) -> bool:
    try:
        with socket.create_connection((address, port), timeout=0.2):
            return True
    except OSError:
        return False


# Test modules each import the fixture, so pytest registers it once per module: the daemon is
# shared by reference count and stopped when the last user finishes.
_shared: dict = {"sshd": None, "users": 0}


def _claim(port: int):
    """The port's lock file, locked for this process (None: another test run holds it)."""
    f = open(f"/run/lock/corral-test-sshd-{port}.lock", "w")
    try:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        f.close()
        return None
    return f


def _start(d: Path, port: int) -> Sshd | None:
    """Start sshd on `port`; None if it exits at once (the port was taken meanwhile)."""
    host_pub = _keygen(d / "host_ed25519", "corral-test-host")
    _keygen(d / "client_ed25519", "corral-test-client")
    (d / "authorized_keys").write_text((d / "client_ed25519.pub").read_text())
    os.chmod(d / "authorized_keys", 0o600)
    config = d / "sshd_config"
    config.write_text("\n".join([
        f"Port {port}", *(f"ListenAddress {a}" for a in ADDRESSES),
        f"HostKey {d / 'host_ed25519'}", f"PidFile {d / 'sshd.pid'}",
        f"AuthorizedKeysFile {d / 'authorized_keys'}",
        "PermitRootLogin prohibit-password", "PubkeyAuthentication yes",
        "PasswordAuthentication no", "KbdInteractiveAuthentication no", "UsePAM no",
        "StrictModes no", "AllowTcpForwarding yes", "MaxStartups 100:30:200", "MaxSessions 50",
        "Subsystem sftp internal-sftp", "LogLevel ERROR", "",
    ]))
    Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # privilege separation directory
    proc = subprocess.Popen([SSHD, "-D", "-f", str(config), "-E", str(d / "sshd.log")],
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 10
    while not all(_listening(a, port) for a in ADDRESSES):
        if proc.poll() is not None:
            return None
        if time.monotonic() > deadline:
            _stop(proc)
            log = (d / "sshd.log").read_text() if (d / "sshd.log").exists() else ""
            pytest.fail(f"private sshd did not start: {log[-2000:]}")
        time.sleep(0.05)
    _shared["proc"] = proc
    return Sshd(dir=d, pid=proc.pid, client_key=d / "client_ed25519", host_pubkey=host_pub,
                port=port)


def _stop(proc: subprocess.Popen) -> None:
    """Stop our sshd by its PID (never by name)."""
    if proc.poll() is None:
        os.kill(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()


@pytest.fixture(scope="session")
def sshd(tmp_path_factory) -> Sshd:
    if os.geteuid() != 0:
        pytest.skip("engine SSH tests need root (a private sshd that allows root login)")
    if not os.access(SSHD, os.X_OK):
        pytest.skip(f"{SSHD} is missing (apt-get install -y openssh-server)")
    if _shared["sshd"] is None:
        for port in PORTS:
            claim = _claim(port)
            if claim is None:
                continue
            if not any(_listening(a, port) for a in ADDRESSES):
                _shared["sshd"] = _start(tmp_path_factory.mktemp("sshd"), port)
                if _shared["sshd"] is not None:
                    _shared["claim"] = claim
                    break
            claim.close()
        else:
            pytest.skip(f"ports {PORTS.start}-{PORTS.stop - 1} of {', '.join(ADDRESSES)} are all in use")
    _shared["users"] += 1
    try:
        yield _shared["sshd"]
    finally:
        _shared["users"] -= 1
        if _shared["users"] == 0:
            _stop(_shared.pop("proc"))
            _shared.pop("claim").close()
            _shared["sshd"] = None


SPEC = """\
name: enginetest
ssh:
  user: root
  key: {key}
  port: {port}
nodes:
  - names: ctl1
    addresses: [{a0}]
    roles: [controller]
  - names: cn1
    addresses: [{a1}]
    roles: [compute]
  - names: down1
    addresses: [{down}]
    roles: [compute]
"""


def make_cluster(tmp_path: Path, sshd: Sshd, *, trust: bool = True, extra: str = ""):
    """A Cluster in tmp_path (state dir tmp_path/.corral) with ctl1, cn1 (up) and down1 (down)."""
    from corral.engine import hostkeys
    from corral.spec.loader import load_text

    text = SPEC.format(key=sshd.client_key, port=sshd.port, a0=ADDRESSES[0], a1=ADDRESSES[1],
                       down=DOWN) + extra
    spec_path = tmp_path / "cluster.yaml"
    spec_path.write_text(text)
    cluster = load_text(text, str(spec_path))
    if trust:
        for address in ADDRESSES:
            hostkeys.add(hostkeys.known_hosts_path(cluster.state_dir), address, sshd.port,
                         sshd.host_pubkey)
    return cluster


@pytest.fixture
def engine_cluster(tmp_path, sshd):
    return make_cluster(tmp_path, sshd)
