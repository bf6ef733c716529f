"""Pinned SSH host keys: the state dir's known_hosts, fingerprints, and ssh-keyscan.

Entries are OpenSSH known_hosts lines `HOST KEYTYPE BASE64`, HOST being `address` for port 22
and `[address]:port` otherwise (the form paramiko and OpenSSH look up). Nothing here trusts a
key on its own: `scan` only reads one so that a person can compare its fingerprint first.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from corral.errors import CorralError, HostToolError

KNOWN_HOSTS = "known_hosts"


@dataclass(frozen=True)
class HostKey:
    host: str      # "10.0.0.1" or "[10.0.0.1]:2222"
    keytype: str   # "ssh-ed25519"
    key: str       # base64 blob

    def line(self) -> str:
        return f"{self.host} {self.keytype} {self.key}"

    @property
    def fingerprint(self) -> str:
        return fingerprint(f"{self.keytype} {self.key}")


def host_entry(address: str, port: int = 22) -> str:
    """The known_hosts name of a host: `address`, or `[address]:port` for a port other than 22."""
    return address if int(port) == 22 else f"[{address}]:{int(port)}"


def _split_pubkey(pubkey_line: str) -> tuple[str, str]:
    """(keytype, base64) from `keytype b64 [comment]` or a known_hosts/keyscan `host keytype b64`."""
    parts = pubkey_line.split()
    for i in range(len(parts) - 1):
        if parts[i].startswith(("ssh-", "ecdsa-", "sk-")):
            return parts[i], parts[i + 1]
    raise CorralError("not an SSH public key line", value=pubkey_line[:80],
                      fix="give a line like 'ssh-ed25519 AAAA...'")


def fingerprint(pubkey_line: str) -> str:
    """SHA256 fingerprint as `ssh-keygen -lf` prints it: 'SHA256:' + unpadded base64."""
    keytype, b64 = _split_pubkey(pubkey_line)
    try:
        blob = base64.b64decode(b64, validate=True)
    except (binascii.Error, ValueError):
        raise CorralError("SSH public key is not valid base64", value=b64[:40]) from None
    digest = base64.b64encode(hashlib.sha256(blob).digest()).decode().rstrip("=")
    return f"SHA256:{digest}"


def known_hosts_path(state_dir: Path) -> Path:
    return Path(state_dir) / KNOWN_HOSTS


def read(path: Path) -> list[HostKey]:
    """Every plain entry of a known_hosts file (comments, markers and hashed names are skipped)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    keys = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", "@", "|")):
            continue
        parts = line.split()
        if len(parts) < 3:
            continue
        for host in parts[0].split(","):
            keys.append(HostKey(host, parts[1], parts[2]))
    return keys


def lookup(path: Path, address: str, port: int = 22) -> list[HostKey]:
    entry = host_entry(address, port)
    return [k for k in read(path) if k.host == entry]


def _write(path: Path, keys: list[HostKey]) -> None:
    path = Path(path)
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.writelines(k.line() + "\n" for k in keys)
    os.replace(tmp, path)


def add(path: Path, address: str, port: int, pubkey_line: str, *, replace: bool = False) -> HostKey:
    """Pin `pubkey_line` for address:port. A different key already pinned is an error unless replace."""
    keytype, b64 = _split_pubkey(pubkey_line)
    fingerprint(f"{keytype} {b64}")  # validates the base64
    new = HostKey(host_entry(address, port), keytype, b64)
    keys = read(path)
    same_host = [k for k in keys if k.host == new.host]
    if new in same_host and len(same_host) == 1:
        return new
    if same_host and not replace:
        raise CorralError(
            f"a different host key is already pinned for {new.host}", value=same_host[0].fingerprint,
            fix=f"verify the node, then replace the key (new key {new.fingerprint})")
    _write(path, [k for k in keys if k.host != new.host] + [new])
    return new


def remove(path: Path, address: str, port: int = 22) -> int:
    """Drop every pinned key of address:port; returns how many were removed."""
    entry = host_entry(address, port)
    keys = read(path)
    kept = [k for k in keys if k.host != entry]
    if len(kept) != len(keys):
        _write(path, kept)
    return len(keys) - len(kept)


def remove_hosts(path: Path, hosts: set[str]) -> list[HostKey]:
    """Drop every pinned key whose host is one of `hosts` (known_hosts names); returns those removed."""
    keys = read(path)
    gone = [k for k in keys if k.host in hosts]
    if gone:
        _write(path, [k for k in keys if k.host not in hosts])
    return gone


def scan(address: str, port: int = 22, *, timeout: int = 5) -> str:
    """Read (not trust) the node's ed25519 host key: returns 'ssh-ed25519 BASE64'."""
    tool = shutil.which("ssh-keyscan")
    if tool is None:
        raise HostToolError("ssh-keyscan is not installed on this host",
                            fix="install the OpenSSH client (apt-get install openssh-client)")
    cmd = [tool, "-t", "ed25519", "-T", str(timeout), "-p", str(int(port)), address]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout + 5, check=False)
    except subprocess.TimeoutExpired:
        proc = None
    lines = [ln for ln in (proc.stdout if proc else "").splitlines()
             if ln.strip() and not ln.startswith("#")]
    if not lines:
        detail = (proc.stderr.strip().splitlines() or [""])[-1] if proc else "timed out"
        raise CorralError(f"could not read the ed25519 host key of {host_entry(address, port)}",
                          value=detail or None,
                          fix="check the node is up and sshd listens on that address and port")
    keytype, b64 = _split_pubkey(lines[0])
    return f"{keytype} {b64}"
