"""The cluster's own certificate authority, made once on the control host, and the server certificates it
signs for corral's services (the notebook hub's HTTPS, the image registry's TLS).

The CA's key stays in the state dir's secrets (0600) and never leaves the control host; only its
certificate is handed out (to nodes, and to users' browsers: docs/components/notebooks.md says how to
trust it; the nodes' trust stores hold it: deploy/registry.py `trust`). A server certificate is signed for exactly the names and addresses it is reached by and kept
with its key beside the CA, so a re-run pushes the same bytes (no change) until the names change or it
nears its end. Uses the `cryptography` library (paramiko's own dependency).

Every node trusts the CA system-wide (apt, pip, curl, podman), so a CA made now carries name constraints: it can
only vouch for the cluster's own names and addresses (`scope`: every node's name and address, and the names the
spec gives the hub), never for pypi.org or a mirror (security review 3, N16). A name outside them is refused
before anything is signed, with the way to make a CA that covers it. A CA made before this has none; it is kept.
"""

from __future__ import annotations

import datetime
import ipaddress
import json
import os
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from corral.errors import CorralError

CA_DAYS, SERVER_DAYS = 3650, 825
RENEW_DAYS = SERVER_DAYS // 3  # made again with less than a third of its life left


@dataclass(frozen=True)
class ServerCert:
    cert: str  # PEM: the server's certificate, then the CA's (the chain a client is sent)
    key: str   # PEM, unencrypted: goes to the node as a 0600 file
    ca: str    # PEM of the CA alone


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.timezone.utc)


def _write_private(path: Path, data: bytes) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


def _dir(state_dir: Path) -> Path:
    d = Path(state_dir) / "secrets" / "ca"
    d.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(d, 0o700)
    return d


def _key_pem(key) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def _subtrees(scope: list[str]) -> list[x509.GeneralName]:
    """The CA's permitted names: each host name (and the names under it), each address alone."""
    out: list[x509.GeneralName] = []
    for n in dict.fromkeys(scope):
        try:
            ip = ipaddress.ip_address(n)
            out.append(x509.IPAddress(ipaddress.ip_network(f"{ip}/{ip.max_prefixlen}")))
        except ValueError:
            out.append(x509.DNSName(n))
    return out


def permits(ca, name: str) -> bool:
    """Whether the CA's name constraints (none: everything) let it vouch for `name`."""
    try:
        nc = ca.extensions.get_extension_for_class(x509.NameConstraints).value
    except x509.ExtensionNotFound:
        return True
    permitted = nc.permitted_subtrees or []
    try:
        ip = ipaddress.ip_address(name)
        return any(isinstance(g, x509.IPAddress) and ip in g.value for g in permitted)
    except ValueError:
        return any(isinstance(g, x509.DNSName) and (name == g.value or name.endswith("." + g.value))
                   for g in permitted)


def authority(state_dir: Path, cluster_name: str, scope: list[str] | None = None):
    """(certificate, key) of the cluster's CA, made the first time it is asked for (constrained to `scope`)."""
    d = _dir(state_dir)
    crt, key = d / "ca.pem", d / "ca.key"
    if crt.exists() != key.exists():
        raise CorralError("the cluster CA is half there (one of its certificate and key is missing)", where=str(d),
                          fix=f"put the missing file back from a backup, or remove {d} so corral makes a new CA "
                              "(every certificate it signed is then made again and must be trusted anew)")
    if not crt.exists():
        k = ec.generate_private_key(ec.SECP256R1())
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"corral CA of {cluster_name}")])
        cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(k.public_key())
                .serial_number(x509.random_serial_number()).not_valid_before(_now() - datetime.timedelta(minutes=5))
                .not_valid_after(_now() + datetime.timedelta(days=CA_DAYS))
                .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
                .add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True)
                .add_extension(x509.SubjectKeyIdentifier.from_public_key(k.public_key()), critical=False))
        if scope:
            cert = cert.add_extension(x509.NameConstraints(permitted_subtrees=_subtrees(scope), excluded_subtrees=None),
                                      critical=True)
        cert = cert.sign(k, hashes.SHA256())
        _write_private(key, _key_pem(k))
        crt.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    cert = x509.load_pem_x509_certificate(crt.read_bytes())
    k = serialization.load_pem_private_key(key.read_bytes(), password=None)
    return cert, k


def constrained(state_dir: Path) -> bool | None:
    """Whether the cluster's CA carries name constraints; None when there is none yet (nothing is made here)."""
    crt = Path(state_dir) / "secrets" / "ca" / "ca.pem"
    if not crt.is_file():
        return None
    try:
        x509.load_pem_x509_certificate(crt.read_bytes()).extensions.get_extension_for_class(x509.NameConstraints)
    except x509.ExtensionNotFound:
        return False
    return True


def ca_pem(state_dir: Path, cluster_name: str, scope: list[str] | None = None) -> str:
    cert, _ = authority(state_dir, cluster_name, scope)
    return cert.public_bytes(serialization.Encoding.PEM).decode()


def _signed_by(cert, ca) -> bool:
    """Whether `ca` signed `cert` (a CA made again, after a lost state dir, has the same name)."""
    try:
        cert.verify_directly_issued_by(ca)
        return True
    except (ValueError, TypeError, InvalidSignature):
        return False


def _sans(names: list[str]) -> list[x509.GeneralName]:
    out: list[x509.GeneralName] = []
    for n in names:
        try:
            out.append(x509.IPAddress(ipaddress.ip_address(n)))
        except ValueError:
            out.append(x509.DNSName(n))
    return out


def server_cert(state_dir: Path, cluster_name: str, service: str, names: list[str],
                scope: list[str] | None = None) -> ServerCert:
    """A certificate for `service` valid for `names` (host names and addresses), signed by the cluster CA;
    the one kept from before while its names are the same and it is not near its end."""
    ca, ca_key = authority(state_dir, cluster_name, scope)
    d = _dir(state_dir)
    outside = [n for n in names if not permits(ca, n)]
    if outside:
        raise CorralError(f"the cluster CA may vouch only for the names it was made for, not {', '.join(outside)}",
                          where=str(d), fix=f"move {d} away and apply again: a new CA covers the cluster's names "
                                            "now, and every node is given it (browsers must import it again)")
    crt, key, meta = d / f"{service}.pem", d / f"{service}.key", d / f"{service}.json"
    ca_text = ca.public_bytes(serialization.Encoding.PEM).decode()
    if crt.exists() and key.exists() and meta.exists():
        cert = x509.load_pem_x509_certificate(crt.read_bytes())
        fresh = cert.not_valid_after_utc - _now() > datetime.timedelta(days=RENEW_DAYS)
        if json.loads(meta.read_text()) == sorted(names) and fresh and _signed_by(cert, ca):
            return ServerCert(crt.read_text() + ca_text, key.read_text(), ca_text)
    k = ec.generate_private_key(ec.SECP256R1())
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, names[0])]))
            .issuer_name(ca.subject).public_key(k.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(_now() - datetime.timedelta(minutes=5))
            .not_valid_after(_now() + datetime.timedelta(days=SERVER_DAYS))
            .add_extension(x509.SubjectAlternativeName(_sans(names)), critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
            .sign(ca_key, hashes.SHA256()))
    _write_private(key, _key_pem(k))
    crt.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    meta.write_text(json.dumps(sorted(names)))
    return ServerCert(crt.read_text() + ca_text, key.read_text(), ca_text)


def token_signer(state_dir: Path, cluster_name: str) -> tuple[str, str]:
    """(certificate, key) PEM of the key that signs the site registry's tokens (render/registry_auth.py): its own,
    self-signed, never the CA's, so no server key the CA signed (the hub's, the registry's) can mint a token.
    Made once, kept beside the CA."""
    d = _dir(state_dir)
    crt, key = d / "registry-token-signer.pem", d / "registry-token-signer.key"
    if crt.exists() and key.exists():
        cert = x509.load_pem_x509_certificate(crt.read_bytes())
        if cert.not_valid_after_utc - _now() > datetime.timedelta(days=RENEW_DAYS):
            return crt.read_text(), key.read_text()
    k = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"{cluster_name} registry token signer (corral)")])
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(k.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(_now() - datetime.timedelta(minutes=5))
            .not_valid_after(_now() + datetime.timedelta(days=CA_DAYS))
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, content_commitment=False, key_encipherment=False,
                                         data_encipherment=False, key_agreement=False, key_cert_sign=False,
                                         crl_sign=False, encipher_only=False, decipher_only=False), critical=True)
            .sign(k, hashes.SHA256()))
    _write_private(key, _key_pem(k))
    crt.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return crt.read_text(), key.read_text()
