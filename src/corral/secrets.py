"""Secrets generated once on the control host and kept in the state dir (dir 0700, files 0600).

Never derived from a password, never printed, never journaled (deploys upload them as file
content, which the engine does not record, or mark them secret). A secret file that is there but
empty, blank or too short (a truncated copy, an editor's leftover) is refused, never pushed to the
nodes. Secrets the admin keeps in files of their own (the LDAP bind password) are read with
admin_secret_text: bounded, refused naming the file when they hold nothing. The registry's CA and
the registry node's certificate (images.registry) are made here too: the keys never leave the control
host but as file content.
"""

from __future__ import annotations

import os
import secrets as _random
from pathlib import Path

from corral.errors import CorralError

MIN_KEY_BYTES = 32  # munge refuses a key under 32 bytes; no random key corral makes is shorter


def _path(state_dir: Path, name: str) -> Path:
    d = Path(state_dir) / "secrets"
    d.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(d, 0o700)
    return d / name


def _refuse(p: Path, what: str) -> CorralError:
    return CorralError(f"secret file is {what}; refusing to push it to the nodes", where=str(p),
                       fix=f"put the real secret back into {p} (from a backup or a node), or remove {p} "
                           "so corral generates a new one and pushes it to every node on the next apply")


def secret_bytes(state_dir: Path, name: str, nbytes: int, min_bytes: int = MIN_KEY_BYTES) -> bytes:
    """The secret `name`, created with `nbytes` random bytes the first time it is asked for; one
    already there must hold at least `min_bytes` bytes (munge: 32)."""
    if nbytes < min_bytes:
        raise ValueError(f"{name}: {nbytes} bytes asked, under the minimum of {min_bytes}")
    p = _path(state_dir, name)
    if not p.exists():
        fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(_random.token_bytes(nbytes))
    data = p.read_bytes()
    if not data.strip():
        raise _refuse(p, "empty" if not data else "blank (whitespace only)")
    if len(data) < min_bytes:
        raise _refuse(p, f"{len(data)} bytes long, under the {min_bytes} bytes it needs at least")
    return data


def secret_text(state_dir: Path, name: str, nchars: int = 32) -> str:
    """A random password (URL-safe characters), created once; one already there must not be blank."""
    p = _path(state_dir, name)
    if not p.exists():
        fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(_random.token_urlsafe(nchars)[:nchars])
    text = p.read_text().strip()
    if not text:
        raise _refuse(p, "empty" if not p.stat().st_size else "blank (whitespace only)")
    return text


def admin_secret_text(path: Path, what: str, max_bytes: int = 4096) -> str:
    """A secret the admin keeps in a file of their own (e.g. the LDAP bind password): its text less one
    trailing newline; refused, naming the file, when it is missing, empty, blank, not UTF-8 or longer
    than `max_bytes` (a wrong file, not a password). Never part of an error message."""
    p = Path(path)
    try:
        with open(p, "rb") as f:
            data = f.read(max_bytes + 1)
    except OSError as exc:
        raise CorralError(f"cannot read the {what}: {exc.strerror or exc}", where=str(p),
                          fix=f"put the {what} into {p} (readable by the user running corral)") from None
    if len(data) > max_bytes:
        raise CorralError(f"the {what} file is longer than {max_bytes} bytes: not a password file", where=str(p),
                          fix="write the password alone on the file's first line")
    try:
        text = data.decode()
    except UnicodeDecodeError:
        raise CorralError(f"the {what} file is not UTF-8 text", where=str(p),
                          fix="write the password alone on the file's first line") from None
    text = text.removesuffix("\n").removesuffix("\r")
    if not text.strip():
        raise CorralError(f"the {what} file is {'empty' if not text else 'blank (whitespace only)'}",
                          where=str(p), fix=f"put the {what} into {p}")
    return text


CA_DAYS, CERT_DAYS = 3650, 825  # the CA outlives its server certificates, renewed by the apply after


def _private_write(p: Path, data: bytes) -> None:
    """Write `data` to `p` created 0600 (replacing it: never a moment with other modes)."""
    tmp = p.with_suffix(p.suffix + ".new")
    tmp.unlink(missing_ok=True)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.replace(tmp, p)


def _new_cert(subject: str, key, issuer_name, issuer_key, days: int, ca: bool, sans=()):
    import datetime
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes
    from cryptography.x509.oid import NameOID
    now = datetime.datetime.now(datetime.timezone.utc)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)])
    b = (x509.CertificateBuilder().subject_name(name).issuer_name(issuer_name or name)
         .public_key(key.public_key()).serial_number(x509.random_serial_number())
         .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=days))
         .add_extension(x509.BasicConstraints(ca=ca, path_length=0 if ca else None), critical=True))
    if ca:
        b = b.add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True)
    else:
        b = b.add_extension(x509.SubjectAlternativeName(list(sans)), critical=False)
    return b.sign(issuer_key or key, hashes.SHA256())


def _pem_pair(cert, key) -> tuple[bytes, bytes]:
    from cryptography.hazmat.primitives import serialization as s
    return (cert.public_bytes(s.Encoding.PEM),
            key.private_bytes(s.Encoding.PEM, s.PrivateFormat.PKCS8, s.NoEncryption()))


def registry_ca(state_dir: Path) -> tuple[bytes, bytes]:
    """corral's CA for the cluster's registry (PEM certificate, PEM key), made once in the state dir."""
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    crt, key = _path(state_dir, "registry-ca.crt"), _path(state_dir, "registry-ca.key")
    if not (crt.exists() and key.exists()):
        k = ec.generate_private_key(ec.SECP256R1())
        cert_pem, key_pem = _pem_pair(_new_cert("corral registry CA", k, None, None, CA_DAYS, True), k)
        _private_write(key, key_pem)
        _private_write(crt, cert_pem)
    cert_pem, key_pem = crt.read_bytes(), key.read_bytes()
    try:
        x509.load_pem_x509_certificate(cert_pem)
        serialization.load_pem_private_key(key_pem, None)
    except ValueError:
        raise _refuse(crt, "not a PEM certificate and key pair") from None
    return cert_pem, key_pem


def registry_cert(state_dir: Path, name: str, address: str) -> tuple[bytes, bytes]:
    """The registry node's certificate, signed by registry_ca, for `name` and `address` (PEM cert, PEM
    key); made again only when those change, its CA changed, or it has less than a third of its life left."""
    import datetime
    import ipaddress
    from cryptography import x509
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    ca_pem, ca_key_pem = registry_ca(state_dir)
    ca = x509.load_pem_x509_certificate(ca_pem)
    sans = [x509.DNSName(name), x509.IPAddress(ipaddress.ip_address(address))]
    crt, key = _path(state_dir, "registry.crt"), _path(state_dir, "registry.key")
    if crt.exists() and key.exists():
        cur = x509.load_pem_x509_certificate(crt.read_bytes())
        left = cur.not_valid_after_utc - datetime.datetime.now(datetime.timezone.utc)
        have = list(cur.extensions.get_extension_for_class(x509.SubjectAlternativeName).value)
        try:
            cur.verify_directly_issued_by(ca)  # a CA made again (a lost state dir) has the same name
            signed = True
        except (ValueError, TypeError, InvalidSignature):
            signed = False
        if signed and have == sans and left > datetime.timedelta(days=CERT_DAYS // 3):
            return crt.read_bytes(), key.read_bytes()
    k = ec.generate_private_key(ec.SECP256R1())
    cert = _new_cert(name, k, ca.subject, serialization.load_pem_private_key(ca_key_pem, None), CERT_DAYS, False, sans)
    cert_pem, key_pem = _pem_pair(cert, k)
    _private_write(key, key_pem)
    _private_write(crt, cert_pem)
    return cert_pem, key_pem
