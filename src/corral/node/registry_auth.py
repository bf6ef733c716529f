"""corral's token server for the site registry (distribution's `auth: token`), run on the registry node as its
own user, never root (render/registry_auth.py writes its unit and configuration; docs/components/images.md).

distribution answers a request without a token 401, naming this server; the client asks it for a token for the
scopes it needs, with or without a user name and password, and shows the token to the registry. Who gets what:
- anyone, with no credentials or a user name it does not know: pull (every cluster user pulls; a cache's upstream
  credentials, sent to every registry it proxies, are not ours to judge);
- `munge` with a MUNGE credential as the password (corral's credential helper makes one on the user's node:
  `munge -s PAYLOAD`): the uid munged vouches for. Its payload must be this registry's; a credential minted for
  something else, replayed after its time or forged is no one's (anonymous: pulls never depend on munge). A member of the push group may push, except into a repository corral's loader has
  written: the bundle's images cannot be overwritten by users;
- `corral-loader` with corral's secret (the control host's, for the bundle's images): push anywhere; every
  repository it is given push for is recorded, on disk, before the token is issued.
Nobody gets delete, `*`, or any scope but a repository's. A wrong loader secret: 401.

stdlib, plus Debian's python3-cryptography for the signature (ES256, the signer's certificate in the x5c header:
distribution checks it against its `rootcertbundle`). Started `python3 -I registry_auth.py CONFIG`.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import re
import ssl
import subprocess
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

LOADER, MUNGE_USER = "corral-loader", "munge"
_PART = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"  # distribution's repository name grammar (reference/regexp.go)
REPOSITORY = re.compile(rf"{_PART}(?:/{_PART})*")
SCOPE = re.compile(r"repository:([^:\s]{1,255}):([a-z*,]{1,40})")
MAX_SCOPES, MAX_CREDENTIAL = 20, 4096
UNMUNGE_TIMEOUT_S = 10
CACHE_MAX = 4096


def parse_scopes(values: list[str]) -> list[tuple[str, set[str]]]:
    """(repository, actions asked) of each well-formed repository scope; anything else is dropped (granted nothing)."""
    out = []
    for value in values:
        for item in value.split()[:MAX_SCOPES]:
            m = SCOPE.fullmatch(item)
            if m and REPOSITORY.fullmatch(m[1]):
                out.append((m[1], set(m[2].split(","))))
    return out[:MAX_SCOPES]


def grant(who: str | None, scopes, member: bool, protected: set[str]) -> list[dict]:
    """What the token allows: pull for all; push for the loader, and for a member outside the loader's
    repositories; never delete or `*`."""
    out = []
    for name, asked in scopes:
        actions = ["pull"] if "pull" in asked else []
        if "push" in asked and (who == LOADER or (member and name not in protected)):
            actions.append("push")
        out.append({"type": "repository", "name": name, "actions": actions})
    return out


def basic(header: str | None) -> tuple[str, str] | None:
    if not header or not header.startswith("Basic "):
        return None
    try:
        user, sep, secret = base64.b64decode(header[6:].strip(), validate=True).decode().partition(":")
    except (ValueError, UnicodeDecodeError):
        return None
    return (user, secret) if sep else None


def parse_unmunge(out: str, payload: str) -> int | None:
    """The uid of unmunge --numeric's answer when it succeeded and carries `payload`; None otherwise."""
    meta, _, body = out.partition("\n\n")
    fields = {k.strip(): v.strip() for k, sep, v in (line.partition(":") for line in meta.splitlines()) if sep}
    status = fields.get("STATUS", "")  # --numeric: "0"; otherwise "Success (0)"
    if status not in ("0", "Success (0)") or body.rstrip("\n") != payload:
        return None
    m = re.fullmatch(r"(?:\S+ \()?(\d+)\)?", fields.get("UID", ""))
    return int(m[1]) if m else None


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def jwt(claims: dict, key, cert_der: bytes) -> str:
    """claims signed ES256, the signer's certificate in x5c."""
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature
    header = {"typ": "JWT", "alg": "ES256", "x5c": [base64.b64encode(cert_der).decode()]}
    signing = f"{b64url(json.dumps(header).encode())}.{b64url(json.dumps(claims).encode())}"
    r, s = decode_dss_signature(key.sign(signing.encode(), ec.ECDSA(hashes.SHA256())))
    return f"{signing}.{b64url(r.to_bytes(32, 'big') + s.to_bytes(32, 'big'))}"


class Authority:
    """The configuration, the signer, the loader's repositories and the credentials already decoded."""

    def __init__(self, cfg: dict) -> None:
        from cryptography import x509
        from cryptography.hazmat.primitives import serialization
        self.cfg, self.lock, self.seen = cfg, threading.Lock(), {}
        with open(cfg["signing_key"], "rb") as f:
            self.key = serialization.load_pem_private_key(f.read(), None)
        with open(cfg["signing_cert"], "rb") as f:
            self.cert_der = x509.load_pem_x509_certificate(f.read()).public_bytes(serialization.Encoding.DER)
        try:
            with open(cfg["protected_file"]) as f:
                self.protected = {line.strip() for line in f if line.strip()}
        except FileNotFoundError:
            self.protected = set()

    def munge_uid(self, cred: str) -> int | None:
        """The uid a MUNGE credential vouches for (unmunge; a credential it decoded before, from the cache:
        a client shows the same one for every scope, and munged refuses a replay)."""
        if len(cred) > MAX_CREDENTIAL or not cred.startswith("MUNGE:"):
            return None
        digest, now = hashlib.sha256(cred.encode()).hexdigest(), time.time()
        with self.lock:
            hit = self.seen.get(digest)
        if hit and hit[1] > now:
            return hit[0]
        try:
            r = subprocess.run(["/usr/bin/unmunge", "--numeric"], input=cred.encode(), capture_output=True,
                               timeout=UNMUNGE_TIMEOUT_S, check=False)
        except (OSError, subprocess.TimeoutExpired):
            return None
        uid = parse_unmunge(r.stdout.decode(errors="replace"), self.cfg["munge_payload"]) if r.returncode == 0 else None
        if uid is not None:
            with self.lock:
                if len(self.seen) >= CACHE_MAX:
                    self.seen = {k: v for k, v in self.seen.items() if v[1] > now}
                if len(self.seen) < CACHE_MAX:
                    self.seen[digest] = (uid, now + self.cfg["token_ttl"])
        return uid

    def member(self, uid: int) -> tuple[str, bool]:
        import grp
        import pwd
        try:
            pw = pwd.getpwuid(uid)
            gid = grp.getgrnam(self.cfg["push_group"]).gr_gid if self.cfg.get("push_group") else None
        except KeyError:
            return str(uid), False
        return pw.pw_name, gid is not None and gid in os.getgrouplist(pw.pw_name, pw.pw_gid)

    def identify(self, header: str | None) -> tuple[str | None, str, bool] | None:
        """(who, subject, member) of the request; None: credentials given and wrong (401)."""
        got = basic(header)
        if got is None or got[0] not in (LOADER, MUNGE_USER):
            return None, "", False
        if got[0] == LOADER:
            ok = hmac.compare_digest(hashlib.sha256(got[1].encode()).hexdigest(), self.cfg["loader_sha256"])
            return (LOADER, LOADER, False) if ok else None
        uid = self.munge_uid(got[1])
        if uid is None:  # pulls must never depend on munge: a credential that does not decode is no one's
            print("a MUNGE credential that does not decode: anonymous (pull only)", file=sys.stderr, flush=True)
            return None, "", False
        name, member = self.member(uid)
        return name, name, member

    def record(self, access: list[dict]) -> None:
        """The loader's repositories, on disk before its token is issued."""
        new = [a["name"] for a in access if "push" in a["actions"] and a["name"] not in self.protected]
        if not new:
            return
        with self.lock, open(self.cfg["protected_file"], "a") as f:
            f.write("".join(n + "\n" for n in new))
            f.flush()
            os.fsync(f.fileno())
            self.protected.update(new)

    def token(self, who: str | None, subject: str, member: bool, scopes) -> dict:
        access = grant(who, scopes, member, self.protected)
        if who == LOADER:
            self.record(access)
        now, ttl = int(time.time()), self.cfg["token_ttl"]
        claims = {"iss": self.cfg["issuer"], "sub": subject, "aud": self.cfg["service"], "exp": now + ttl,
                  "nbf": now - 10, "iat": now, "jti": uuid.uuid4().hex, "access": access}
        t = jwt(claims, self.key, self.cert_der)
        issued = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now))
        return {"token": t, "access_token": t, "expires_in": ttl, "issued_at": issued}


class Handler(BaseHTTPRequestHandler):
    server_version, timeout = "corral-registry-auth", 30
    authority: Authority

    def handle(self) -> None:
        try:  # the handshake here, in this request's thread, bounded by `timeout`
            self.connection.do_handshake()
        except (OSError, ValueError):
            return
        super().handle()

    def _send(self, code: int, body: dict, extra: dict | None = None) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        for k, v in {"Content-Type": "application/json", "Content-Length": str(len(data)), **(extra or {})}.items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        url = urlsplit(self.path)
        q = parse_qs(url.query, max_num_fields=MAX_SCOPES + 5)
        if url.path != "/token":
            return self._send(404, {"details": "not found"})
        if q.get("service") != [self.authority.cfg["service"]]:
            return self._send(400, {"details": "unknown service"})
        who = self.authority.identify(self.headers.get("Authorization"))
        if who is None:
            return self._send(401, {"details": "wrong credentials"}, {"WWW-Authenticate": 'Basic realm="corral"'})
        body = self.authority.token(*who, parse_scopes(q.get("scope", [])))
        self.log_message("token for %s", who[1] or "anonymous")
        self._send(200, body)


def serve(cfg: dict) -> None:
    Handler.authority = Authority(cfg)
    server = ThreadingHTTPServer((cfg["address"], cfg["port"]), Handler)
    server.daemon_threads = True
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cfg["cert"], cfg["key"])
    # the handshake in the handler's thread (bounded by its timeout), never in accept's
    server.socket = ctx.wrap_socket(server.socket, server_side=True, do_handshake_on_connect=False)
    server.serve_forever()


if __name__ == "__main__":
    with open(sys.argv[1]) as f:
        serve(json.load(f))
