"""Pinned known_hosts helpers: entries, fingerprints (as ssh-keygen -lf), add/replace/remove, scan."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from conftest_engine import ADDRESSES, sshd  # noqa: E402,F401

from corral.engine import hostkeys  # noqa: E402
from corral.errors import CorralError  # noqa: E402


@pytest.fixture
def pubkey(tmp_path) -> tuple[str, str]:
    if not shutil.which("ssh-keygen"):
        pytest.skip("ssh-keygen missing")
    key = tmp_path / "k"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "c", "-f", str(key)], check=True)
    line = (tmp_path / "k.pub").read_text().strip()
    out = subprocess.run(["ssh-keygen", "-lf", str(tmp_path / "k.pub")], capture_output=True,
                         text=True, check=True).stdout.split()[1]
    return line, out


def test_host_entry():
    assert hostkeys.host_entry("10.0.0.1") == "10.0.0.1"
    assert hostkeys.host_entry("10.0.0.1", 2222) == "[10.0.0.1]:2222"


def test_fingerprint_matches_ssh_keygen(pubkey):
    line, expected = pubkey
    assert hostkeys.fingerprint(line) == expected
    assert hostkeys.fingerprint("[h]:22 " + " ".join(line.split()[:2])) == expected
    with pytest.raises(CorralError):
        hostkeys.fingerprint("garbage")


def test_add_replace_remove(tmp_path, pubkey):
    line, _ = pubkey
    kh = tmp_path / "state" / "known_hosts"
    hostkeys.add(kh, "10.0.0.1", 2222, line)
    hostkeys.add(kh, "10.0.0.1", 2222, line)  # idempotent
    hostkeys.add(kh, "10.0.0.2", 22, line)
    assert kh.read_text().splitlines() == [
        "[10.0.0.1]:2222 " + " ".join(line.split()[:2]), "10.0.0.2 " + " ".join(line.split()[:2])]
    assert kh.stat().st_mode & 0o777 == 0o600 and kh.parent.stat().st_mode & 0o777 == 0o700
    other = "ssh-ed25519 " + "AAAAC3NzaC1lZDI1NTE5AAAAI" + "A" * 43
    with pytest.raises(CorralError, match="different host key is already pinned"):
        hostkeys.add(kh, "10.0.0.1", 2222, other)
    hostkeys.add(kh, "10.0.0.1", 2222, other, replace=True)
    assert [k.key for k in hostkeys.lookup(kh, "10.0.0.1", 2222)] == [other.split()[1]]
    assert hostkeys.remove(kh, "10.0.0.1", 2222) == 1
    assert [k.host for k in hostkeys.read(kh)] == ["10.0.0.2"]


def test_scan_reads_the_private_sshd_key(sshd):
    if not shutil.which("ssh-keyscan"):
        pytest.skip("ssh-keyscan missing")
    assert hostkeys.scan(ADDRESSES[0], sshd.port) == sshd.host_pubkey
    with pytest.raises(CorralError, match="could not read"):
        hostkeys.scan("127.0.0.4", sshd.port, timeout=2)


KEY_A = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAI" + "A" * 43
KEY_B = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAI" + "B" * 43


def test_trust_inspect_says_new_same_changed_and_pins(tmp_path):
    from corral.engine import trust
    kh = tmp_path / "state" / "known_hosts"
    scanned: list[tuple[str, int]] = []

    def scan(address, port):
        scanned.append((address, port))
        return KEY_A

    found = trust.inspect(kh, "gpu01", "10.0.0.11", 2222, scan=scan)
    assert scanned == [("10.0.0.11", 2222)] and not kh.exists()  # inspecting writes nothing
    assert found.state == "new" and found.fingerprint == hostkeys.fingerprint(KEY_A)
    assert found.line == f"gpu01 (10.0.0.11): {hostkeys.fingerprint(KEY_A)}"
    trust.pin(kh, found)
    assert kh.read_text() == "[10.0.0.11]:2222 " + KEY_A + "\n"
    assert kh.parent.stat().st_mode & 0o777 == 0o700
    again = trust.inspect(kh, "gpu01", "10.0.0.11", 2222, scan=scan)
    assert again.state == "same"
    trust.pin(kh, again)  # the same key again: nothing changes
    assert kh.read_text() == "[10.0.0.11]:2222 " + KEY_A + "\n"
    changed = trust.inspect(kh, "gpu01", "10.0.0.11", 2222, scan=lambda a, p: KEY_B)
    assert changed.state == "changed" and changed.pinned[0].fingerprint == hostkeys.fingerprint(KEY_A)
    with pytest.raises(CorralError, match="different host key is already pinned"):
        trust.pin(kh, changed)
    trust.pin(kh, changed, replace=True)
    assert kh.read_text() == "[10.0.0.11]:2222 " + KEY_B + "\n"
    assert trust.inspect(kh, "gpu01", "10.0.0.11", 22, scan=lambda a, p: KEY_B).state == "new"  # other port
