"""The bundle's signing key: an ed25519 OpenPGP key corral generates once per state dir and keeps there
(secrets/bundle-gpg/, 0700, no passphrase: protected like the munge key, by its mode); the bundle
carries only the public key. Signing with gpg, checking with gpgv (what apt itself uses), both with a
time bound and a private home directory, so the host's own keyrings are never read or changed.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from contextlib import contextmanager
from pathlib import Path

from corral.errors import HostToolError

TIMEOUT_S = 60
KEY_DIR = "secrets/bundle-gpg"


def _gpg(home: Path, *args: str, input: bytes | None = None) -> subprocess.CompletedProcess:
    gpg = shutil.which("gpg")
    if gpg is None:
        raise HostToolError("gpg is not installed on this host: it signs the bundle's repository",
                            fix="apt-get install gpg")
    try:
        proc = subprocess.run([gpg, "--homedir", str(home), "--batch", "--no-tty", "--quiet", *args], input=input,
                              capture_output=True, timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise HostToolError(f"gpg {args[0]} did not finish within {TIMEOUT_S} s") from None
    if proc.returncode != 0:
        tail = " | ".join(proc.stderr.decode(errors="replace").strip().splitlines()[-4:])
        raise HostToolError(f"gpg {args[0]} failed: {tail}", fix=f"look at the key in {home}")
    return proc


def _stop_agent(home: Path) -> None:
    """gpg starts an agent for this home directory: stopped again (ours, by its home directory)."""
    gpgconf = shutil.which("gpgconf")
    if gpgconf:
        subprocess.run([gpgconf, "--homedir", str(home), "--kill", "gpg-agent"], capture_output=True,
                       timeout=TIMEOUT_S, check=False)


@contextmanager
def _short(home: Path, keep: bool = False):
    """gpg works in a copy of `home` under a short temporary path: its agent's socket lives in the home
    directory (where /run/user/<uid> is absent), and a socket path is limited to 107 bytes, which a state
    dir deep in a tree exceeds. `keep`: what gpg wrote goes back into `home`. The copy's agent is stopped."""
    tmp = Path(tempfile.mkdtemp(prefix="corral-gpg-"))
    try:
        os.chmod(tmp, 0o700)
        if home.is_dir():
            shutil.copytree(home, tmp, dirs_exist_ok=True, ignore=shutil.ignore_patterns("S.*", "*.lock"))
        yield tmp
        if keep:
            shutil.copytree(tmp, home, dirs_exist_ok=True, ignore=shutil.ignore_patterns("S.*", "*.lock"))
    finally:
        _stop_agent(tmp)
        shutil.rmtree(tmp, ignore_errors=True)


def fingerprint(home: Path) -> str | None:
    if not (home / "pubring.kbx").exists():
        return None
    with _short(home) as work:
        out = _gpg(work, "--with-colons", "--list-secret-keys").stdout.decode()
    fprs = re.findall(r"^fpr:(?:[^:]*:){8}([0-9A-F]{40}):", out, re.M)
    return fprs[0] if fprs else None


def ensure_key(state_dir: Path, name: str) -> tuple[Path, str]:
    """The signing key's home directory and fingerprint, generated when there is none yet."""
    home = state_dir / KEY_DIR
    home.mkdir(parents=True, exist_ok=True)
    os.chmod(home, 0o700)
    fpr = fingerprint(home)
    if fpr is None:
        with _short(home, keep=True) as work:
            _gpg(work, "--passphrase", "", "--quick-gen-key", f"corral bundle signing key ({name})", "ed25519",
                 "sign", "never")
        fpr = fingerprint(home)
    if fpr is None:
        raise HostToolError(f"no signing key in {home} after generating one", fix=f"remove {home} and build again")
    return home, fpr


def export_public(home: Path, fpr: str) -> bytes:
    """The public key as a binary keyring (what apt's signed-by= and gpgv --keyring read)."""
    with _short(home) as work:
        return _gpg(work, "--export", fpr).stdout


def sign(home: Path, fpr: str, data: bytes, *, clear: bool) -> bytes:
    """A detached signature of `data`, or (clear) the clearsigned text (apt's InRelease)."""
    with _short(home) as work:
        return _gpg(work, "--local-user", fpr, "--digest-algo", "SHA256",
                    "--clearsign" if clear else "--detach-sign", input=data).stdout


def verify(keyring: bytes, data: bytes | None, signature: bytes, *, fingerprint: str) -> str | None:
    """None when `signature` (detached, of `data`; or clearsigned when `data` is None) is good and every
    good signature in it is by the primary key `fingerprint` (or a subkey of it); else why not. gpgv accepts
    a signature by any key of the keyring, so its VALIDSIG lines are what decides, not its exit status."""
    gpgv = shutil.which("gpgv")
    if gpgv is None:
        raise HostToolError("gpgv is not installed on this host: it checks the bundle's signature",
                            fix="apt-get install gpgv")
    pinned = fingerprint.upper()
    with tempfile.TemporaryDirectory(prefix="corral-gpgv-") as tmp:
        ring, sig, payload = Path(tmp, "key.gpg"), Path(tmp, "data.sig"), Path(tmp, "data")
        ring.write_bytes(keyring)
        sig.write_bytes(signature)
        files = [str(sig)]
        if data is not None:
            payload.write_bytes(data)
            files.append(str(payload))
        try:
            proc = subprocess.run([gpgv, "--homedir", tmp, "--status-fd", "1", "--keyring", str(ring), *files],
                                  capture_output=True, timeout=TIMEOUT_S)
        except subprocess.TimeoutExpired:
            return f"gpgv did not finish within {TIMEOUT_S} s"
    signers = validsig_primaries(proc.stdout.decode(errors="replace"))
    if proc.returncode != 0 or not signers:
        return " | ".join(proc.stderr.decode(errors="replace").strip().splitlines()[-2:]) or "bad signature"
    others = sorted(set(signers) - {pinned})
    if others:
        return f"signed by key {', '.join(others)}, not the pinned {pinned}"
    return None


def validsig_primaries(status: str) -> list[str]:
    """The primary-key fingerprint of each good signature in gpgv's --status-fd output (VALIDSIG's last
    field, or its first where gpg writes no primary: the signing key is the primary)."""
    out = []
    for line in status.splitlines():
        f = line.split()
        if f[:2] == ["[GNUPG:]", "VALIDSIG"] and len(f) >= 3:
            out.append((f[11] if len(f) >= 12 else f[2]).upper())
    return out


def primary_fingerprints(data: bytes) -> list[str]:
    """The primary keys' fingerprints in a binary keyring or an armored key file, in order (`gpg --show-keys`
    in a throwaway home: no keyring touched); [] when it holds no OpenPGP key."""
    with tempfile.TemporaryDirectory(prefix="corral-gpg-") as tmp:
        try:
            out = _gpg(Path(tmp), "--with-colons", "--show-keys", input=data).stdout.decode()
        except HostToolError:
            return []
        finally:
            _stop_agent(Path(tmp))
    return re.findall(r"^pub:.*\n(?:^(?!pub:).*\n)*?^fpr:(?:[^:]*:){8}([0-9A-F]{40}):", out, re.M)


def key_fingerprint(keyring: bytes) -> str | None:
    """The primary key fingerprint of a binary public keyring."""
    fprs = primary_fingerprints(keyring)
    return fprs[0] if fprs else None
