"""One carried image (bundle/oci_layout.py) pushed from the unpacked, verified bundle into a registry over
the distribution API (stdlib only: the air-gapped control host needs no client of its own).

Idempotent: the registry's digest for the tag is asked first (HEAD of the manifest) and an image already
there at the carried digest is left alone; a blob the repository holds is not sent again. The image
manifest is read by its recorded digest and checked against it; only the descriptors whose digests the
signed entry lists are pushed, then the manifest, and the registry's digest for it must be the carried
one. Every request has a socket timeout and the whole image a deadline."""

from __future__ import annotations

import base64
import hashlib
import http.client
import json
import re
import ssl
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

from corral.bundle.oci_layout import blob_file, descriptors
from corral.errors import CorralError
from corral.spec.image_ref import DIGEST

REQUEST_TIMEOUT_S = 300   # no byte for this long: the request failed
IMAGE_TIMEOUT_S = 3600    # one image, all its blobs


class Registry:
    """`credentials` (user, secret): shown to the registry's token server (distribution's `auth: token`, the site
    registry's: render/registry_auth.py) when the registry asks for a token; `hosts` maps a host name in its
    realm to the address this host reaches it by."""

    def __init__(self, base_url: str, context: ssl.SSLContext, timeout: float = REQUEST_TIMEOUT_S,
                 credentials: tuple[str, str] | None = None, hosts: dict[str, str] | None = None) -> None:
        self.base, self.context, self.timeout = base_url.rstrip("/"), context, timeout
        self.credentials, self.hosts, self.token = credentials, hosts or {}, None

    def _token(self, challenge: str, method: str) -> str:
        """A token for what the 401 asked (push too, for a write), from the realm it names."""
        params = dict(re.findall(r'(\w+)="([^"]*)"', challenge))
        realm = urllib.parse.urlsplit(params.get("realm", ""))
        if realm.scheme != "https" or not realm.hostname:
            raise CorralError(f"the registry names no https token server ({challenge[:200]!r})")
        host = self.hosts.get(realm.hostname, realm.hostname)
        scope = params.get("scope", "")
        if method in ("POST", "PUT", "PATCH") and scope.endswith(":pull"):
            scope += ",push"
        query = urllib.parse.urlencode({"service": params.get("service", ""), "scope": scope})
        netloc = (f"[{host}]" if ":" in host else host) + (f":{realm.port}" if realm.port else "")
        headers = {}
        if self.credentials:
            raw = f"{self.credentials[0]}:{self.credentials[1]}".encode()
            headers["Authorization"] = "Basic " + base64.b64encode(raw).decode()
        req = urllib.request.Request(f"https://{netloc}{realm.path}?{query}", headers=headers)
        try:
            with urllib.request.urlopen(req, context=self.context, timeout=self.timeout) as resp:  # noqa: S310
                body = json.loads(resp.read(65536))
        except (urllib.error.URLError, OSError, ValueError, http.client.HTTPException) as e:
            raise CorralError(f"the registry's token server at {host}: {getattr(e, 'reason', e)}") from None
        token = body.get("token") or body.get("access_token") if isinstance(body, dict) else None
        if not isinstance(token, str):
            raise CorralError(f"the registry's token server at {host} gave no token")
        return token

    def _open(self, method: str, url: str, *, data=None, headers: dict | None = None, ok=(200, 201, 202),
              again: bool = True):
        full = url if url.startswith("http") else self.base + url
        sent = dict(headers or {}, **({"Authorization": f"Bearer {self.token}"} if self.token else {}))
        req = urllib.request.Request(full, method=method, data=data, headers=sent)
        try:
            resp = urllib.request.urlopen(req, context=self.context, timeout=self.timeout)  # noqa: S310 - https
        except urllib.error.HTTPError as e:
            challenge = e.headers.get("WWW-Authenticate", "") if e.headers else ""
            if e.code == 401 and again and challenge.startswith("Bearer "):
                self.token = self._token(challenge, method)
                if hasattr(data, "seek"):
                    data.seek(0)
                return self._open(method, url, data=data, headers=headers, ok=ok, again=False)
            if e.code in ok:  # 404: a HEAD asking whether it is there
                return e
            raise CorralError(f"{method} {full}: HTTP {e.code} {e.read(300).decode(errors='replace').strip()}") \
                from None
        except (urllib.error.URLError, OSError, http.client.HTTPException) as e:  # HTTPException: a broken answer
            raise CorralError(f"{method} {full}: {getattr(e, 'reason', e)}") from None
        try:
            with resp:
                resp.read()
        except (OSError, http.client.HTTPException) as e:  # cut off mid-answer
            raise CorralError(f"{method} {full}: {e}") from None
        return resp

    def digest(self, repository: str, tag: str, media_type: str) -> str | None:
        """The registry's manifest digest for repository:tag (None: not there)."""
        resp = self._open("HEAD", f"/v2/{repository}/manifests/{tag}", headers={"Accept": media_type},
                          ok=(200, 404))
        return resp.headers.get("Docker-Content-Digest") if resp.status == 200 else None

    def has_blob(self, repository: str, digest: str) -> bool:
        return self._open("HEAD", f"/v2/{repository}/blobs/{digest}", ok=(200, 404)).status == 200

    def upload(self, repository: str, digest: str, path: Path) -> None:
        location = self._open("POST", f"/v2/{repository}/blobs/uploads/", data=b"").headers.get("Location")
        if not location:
            raise CorralError(f"the registry gave no upload location for {repository}")
        url = (location if location.startswith("http") else self.base + location)
        url += ("&" if "?" in url else "?") + f"digest={digest}"
        with open(path, "rb") as f:
            self._open("PUT", url, data=f, headers={"Content-Type": "application/octet-stream",
                                                   "Content-Length": str(path.stat().st_size)})

    def put_manifest(self, repository: str, tag: str, raw: bytes, media_type: str) -> str | None:
        resp = self._open("PUT", f"/v2/{repository}/manifests/{tag}", data=raw,
                          headers={"Content-Type": media_type})
        return resp.headers.get("Docker-Content-Digest")


def push(registry: Registry, item: dict, root: Path, timeout: int = IMAGE_TIMEOUT_S) -> bool:
    """Push one verified entry from the unpacked bundle at root; False when the registry had it already.
    A CorralError naming the image on any failure."""
    ref, repo, tag, digest, media = item["ref"], item["repository"], item["tag"], item["digest"], item["media_type"]
    deadline = time.monotonic() + timeout
    try:
        if registry.digest(repo, tag, media) == digest:
            return False
        raw = (root / blob_file(item["layout"], digest)).read_bytes()
        if "sha256:" + hashlib.sha256(raw).hexdigest() != digest:
            raise CorralError(f"its manifest differs from {digest} (changed since the bundle was verified)")
        listed = {b["sha256"] for b in item["blobs"]}
        for d in descriptors(json.loads(raw)):
            blob = str(d.get("digest"))
            if not DIGEST.fullmatch(blob) or blob.removeprefix("sha256:") not in listed:
                raise CorralError(f"its manifest names blob {blob[:80]!r}, which the signed manifest does not list")
            if time.monotonic() > deadline:
                raise CorralError(f"not pushed within {timeout} s")
            if not registry.has_blob(repo, blob):
                registry.upload(repo, blob, root / blob_file(item["layout"], blob))
        got = registry.put_manifest(repo, tag, raw, media)
        if got is not None and got != digest:
            raise CorralError(f"the registry holds it as {got}, not the carried {digest}")
    except (CorralError, OSError, ValueError) as e:
        raise CorralError(f"image {ref}: {getattr(e, 'message', e)}", value=ref) from None
    return True
