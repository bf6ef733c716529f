"""The site registry's token server (node/registry_auth.py), in process: who gets which actions, hostile scopes
and credentials, the tokens' signature as distribution checks it, and the spec's push_group rules
(security review 3, N5). The real server with munge, podman and distribution: tests/vcluster/images.py."""

from __future__ import annotations

import base64
import json
import ssl
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from hashlib import sha256

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature

from corral import site_ca
from corral.node import registry_auth as ra

PAYLOAD = "corral-registry ctl:5000"


def test_scopes_other_than_a_wellformed_repository_are_dropped():
    got = ra.parse_scopes(["repository:team/app:pull,push", "registry:catalog:*",
                           "repository:Team/App:pull repository:a/../b:push repository:a//b:pull",
                           "repository:x:pull,push,delete,*", "repository(plugin):p:pull", "repository:" + "a" * 300 + ":pull"])
    assert got == [("team/app", {"pull", "push"}), ("x", {"pull", "push", "delete", "*"})]


@pytest.mark.parametrize(("who", "member", "want"), [
    (None, False, ["pull"]),            # anonymous
    ("alice", False, ["pull"]),         # not in the push group
    ("carol", True, ["pull", "push"]),  # a member, outside the loader's repositories
    (ra.LOADER, False, ["pull", "push"]),
])
def test_grants(who, member, want):
    [got] = ra.grant(who, [("team/app", {"pull", "push", "delete", "*"})], member, set())
    assert got == {"type": "repository", "name": "team/app", "actions": want}


@pytest.mark.attack
def test_a_member_never_pushes_into_the_loaders_repositories():
    [got] = ra.grant("carol", [("nvidia/cuda", {"pull", "push"})], True, {"nvidia/cuda"})
    assert got["actions"] == ["pull"]
    [got] = ra.grant(ra.LOADER, [("nvidia/cuda", {"pull", "push"})], False, {"nvidia/cuda"})
    assert got["actions"] == ["pull", "push"]


@pytest.mark.parametrize("header", [None, "Bearer x", "Basic !!!", "Basic " + base64.b64encode(b"nocolon").decode()])
def test_malformed_basic_credentials_are_none(header):
    assert ra.basic(header) is None


# unmunge --numeric's answer, as munge 0.5.15 (Debian 12) prints it
UNMUNGE = ("STATUS:          0\nENCODE_HOST:     127.0.0.1\nENCODE_TIME:     1796669687\nDECODE_TIME:     1796669687\n"
           "TTL:             300\nCIPHER:          4\nMAC:             5\nZIP:             0\nUID:             {uid}\n"
           "GID:             2001\nLENGTH:          {n}\n\n{payload}")


@pytest.mark.parametrize(("text", "uid"), [
    (UNMUNGE.format(uid="2001", n=len(PAYLOAD), payload=PAYLOAD), 2001),
    (UNMUNGE.format(uid="alice (2001)", n=len(PAYLOAD), payload=PAYLOAD + "\n"), 2001),
    (UNMUNGE.format(uid="2001", n=4, payload="else"), None),       # minted for something else
    (UNMUNGE.format(uid="2001", n=0, payload=""), None),           # no payload
    (UNMUNGE.replace("STATUS:          0", "STATUS:          17").format(uid="2001", n=1, payload=PAYLOAD), None),
    (UNMUNGE.replace("STATUS:          0", "STATUS:          Success (0)").format(uid="2001", n=len(PAYLOAD),
                                                                                  payload=PAYLOAD), 2001),
    (UNMUNGE.format(uid="0; rm", n=len(PAYLOAD), payload=PAYLOAD), None),
])
def test_unmunge_answers(text, uid):
    assert ra.parse_unmunge(text, PAYLOAD) == uid


@pytest.fixture
def server(tmp_path):
    """The token server on 127.0.0.1 with a cluster CA's certificate; munge faked (pure logic: which uid)."""
    made = site_ca.server_cert(tmp_path, "t", "registry", ["127.0.0.1"])
    signer_cert, signer_key = site_ca.token_signer(tmp_path, "t")
    files = {"cert": made.cert, "key": made.key, "signing_cert": signer_cert, "signing_key": signer_key}
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    cfg = {**{k: str(tmp_path / k) for k in files}, "address": "127.0.0.1", "port": 0, "service": "corral-registry",
           "issuer": "corral-registry-auth", "loader_sha256": sha256(b"loader-secret").hexdigest(),
           "push_group": "imagemakers", "munge_payload": PAYLOAD, "protected_file": str(tmp_path / "protected"),
           "token_ttl": 3600}
    ra.Handler.authority = auth = ra.Authority(cfg)
    auth.munge_uid = lambda cred: {"MUNGE:carol": 3001, "MUNGE:alice": 2001}.get(cred)
    auth.member = lambda uid: {3001: ("carol", True), 2001: ("alice", False)}[uid]
    from http.server import ThreadingHTTPServer
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), ra.Handler)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cfg["cert"], cfg["key"])
    httpd.socket = ctx.wrap_socket(httpd.socket, server_side=True, do_handshake_on_connect=False)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    client = ssl.create_default_context(cadata=made.ca)

    def ask(scope: str, user: str | None = None, secret: str = "", service: str = "corral-registry"):
        headers = {"Authorization": "Basic " + base64.b64encode(f"{user}:{secret}".encode()).decode()} if user else {}
        q = urllib.parse.urlencode({"service": service, "scope": scope})
        req = urllib.request.Request(f"https://127.0.0.1:{httpd.server_address[1]}/token?{q}", headers=headers)
        try:
            with urllib.request.urlopen(req, context=client, timeout=10) as resp:
                return resp.status, json.loads(resp.read())
        except urllib.error.HTTPError as e:
            return e.code, None
    yield ask, cfg, signer_cert
    httpd.shutdown()


def _claims(token: str, signer_pem: str) -> dict:
    """The token checked as distribution checks it: ES256 over header.claims by the x5c certificate, which is the
    signer its rootcertbundle holds."""
    head, body, sig = token.split(".")
    pad = lambda s: base64.urlsafe_b64decode(s + "=" * (-len(s) % 4))  # noqa: E731
    header = json.loads(pad(head))
    assert header["alg"] == "ES256"
    cert = x509.load_der_x509_certificate(base64.b64decode(header["x5c"][0]))
    assert cert == x509.load_pem_x509_certificate(signer_pem.encode())
    raw = pad(sig)
    der = encode_dss_signature(int.from_bytes(raw[:32], "big"), int.from_bytes(raw[32:], "big"))
    cert.public_key().verify(der, f"{head}.{body}".encode(), ec.ECDSA(hashes.SHA256()))
    return json.loads(pad(body))


def test_tokens_as_each_caller_gets_them(server):
    ask, cfg, signer = server
    code, body = ask("repository:team/app:pull,push")
    claims = _claims(body["token"], signer)
    assert code == 200 and claims["access"] == [{"type": "repository", "name": "team/app", "actions": ["pull"]}]
    assert (claims["iss"], claims["aud"], claims["sub"]) == ("corral-registry-auth", "corral-registry", "")
    assert _claims(ask("repository:team/app:pull,push", "munge", "MUNGE:carol")[1]["token"], signer)["access"][0][
        "actions"] == ["pull", "push"]
    assert _claims(ask("repository:team/app:pull,push", "munge", "MUNGE:alice")[1]["token"], signer)["access"][0][
        "actions"] == ["pull"]
    # the loader writes nvidia/cuda: recorded before its token, and no member pushes there after
    got = _claims(ask("repository:nvidia/cuda:pull,push", ra.LOADER, "loader-secret")[1]["token"], signer)
    assert got["access"][0]["actions"] == ["pull", "push"] and got["sub"] == ra.LOADER
    assert (open(cfg["protected_file"]).read()) == "nvidia/cuda\n"
    assert _claims(ask("repository:nvidia/cuda:pull,push", "munge", "MUNGE:carol")[1]["token"], signer)["access"][0][
        "actions"] == ["pull"]
    # and after a restart (the list is read back)
    again = ra.Authority(cfg)
    assert again.protected == {"nvidia/cuda"}


@pytest.mark.parametrize(("user", "secret", "code"), [
    (ra.LOADER, "wrong", 401),
    ("munge", "MUNGE:forged", 200), ("munge", "not-a-credential", 200),  # no one's: anonymous, pull only
    ("$oauthtoken", "anything", 200),  # a name it does not know (a cache's upstream credentials): the same
])
def test_a_wrong_loader_secret_is_refused_and_strangers_are_anonymous(server, user, secret, code):
    ask, _, signer = server
    got, body = ask("repository:team/app:pull,push", user, secret)
    assert got == code
    if code == 200:
        assert _claims(body["token"], signer)["access"][0]["actions"] == ["pull"]


def test_another_service_is_refused(server):
    ask = server[0]
    assert ask("repository:team/app:pull", service="docker.io")[0] == 400


def test_the_helper_answers_only_for_the_site_registry(tmp_path):
    """docker-credential-corral as podman runs it: another registry (or a verb but get) gets no credential."""
    from corral.render.registry_auth import helper
    from tests.unit.test_images_deploy import _cluster, images_spec
    cluster = _cluster(tmp_path, images_spec(tmp_path))
    script = tmp_path / "docker-credential-corral"
    script.write_text(helper(cluster))
    for argv, stdin in ((["get"], "nvcr.io\n"), (["store"], "{}"), (["erase"], "ctl:5000\n")):
        proc = subprocess.run([sys.executable, "-I", str(script), *argv], input=stdin, capture_output=True, text=True,
                              timeout=30)
        assert proc.returncode == 1 and "credentials not found" in proc.stdout, (argv, proc.stdout, proc.stderr)
    proc = subprocess.run([sys.executable, "-I", str(script), "list"], capture_output=True, text=True, timeout=30)
    assert (proc.returncode, proc.stdout.strip()) == (0, "{}")


def test_push_group_rules(tmp_path):
    from corral.errors import SpecError
    from tests.unit.test_images_deploy import _cluster, images_spec
    base = images_spec(tmp_path)
    for group, fragment in (("sudo", "root"), ("nosuch", "not a group of the spec")):
        with pytest.raises(SpecError) as err:
            _cluster(tmp_path, base.replace("    node: ctl\n", f"    node: ctl\n    push_group: {group}\n"))
        assert fragment in str(err.value), group
    with pytest.raises(SpecError) as err:
        _cluster(tmp_path, base.replace("    node: ctl\n", "    node: ctl\n    auth_port: 5001\n"))
    assert "auth_port" in str(err.value) or "uses port 5001" in str(err.value)
