"""An upstream registry for the build host only (test scaffolding for tests/vcluster/test_bundle.py): the
busybox image of tests/vcluster/oci_image.py served read-only over HTTPS on loopback by the distribution
API's pull subset (`/v2/`, manifests and blobs by GET and HEAD), with a certificate of a throwaway CA
that skopeo trusts through SSL_CERT_FILE, as a site's private upstream would be. Gone when the block
ends."""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import http.server
import json
import ssl
import threading
from pathlib import Path

from corral import site_ca
from tests.vcluster.oci_image import layer

MEDIA = "application/vnd.oci.image.manifest.v1+json"


def _digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def image(message: str) -> tuple[bytes, dict[str, bytes]]:
    """(the image manifest, its blobs by digest)."""
    raw = layer(message)
    blob = gzip.compress(raw, mtime=0)
    config = json.dumps({"architecture": "amd64", "os": "linux", "config": {"Cmd": ["/bin/sh"]},
                         "rootfs": {"type": "layers", "diff_ids": [_digest(raw)]}}).encode()
    manifest = json.dumps({
        "schemaVersion": 2, "mediaType": MEDIA,
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": _digest(config),
                   "size": len(config)},
        "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", "digest": _digest(blob),
                    "size": len(blob)}]}).encode()
    return manifest, {_digest(blob): blob, _digest(config): config}


@contextlib.contextmanager
def upstream_image(work: Path, repository: str, tag: str, message: str):
    """Serve repository:tag; yields (its reference, the manifest's digest, the CA file to trust)."""
    manifest, blobs = image(message)
    cert = site_ca.server_cert(work / "upstream-ca", "upstream", "upstream", ["127.0.0.1"])
    for name, text in (("cert.pem", cert.cert), ("key.pem", cert.key), ("ca.pem", cert.ca)):
        (work / name).write_text(text)

    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args) -> None:
            pass

        def _body(self) -> tuple[bytes, dict] | None:
            if self.path == "/v2/":
                return b"{}", {"Content-Type": "application/json"}
            if self.path == f"/v2/{repository}/manifests/{tag}" or self.path == \
                    f"/v2/{repository}/manifests/{_digest(manifest)}":
                return manifest, {"Content-Type": MEDIA, "Docker-Content-Digest": _digest(manifest)}
            prefix = f"/v2/{repository}/blobs/"
            if self.path.startswith(prefix) and self.path[len(prefix):] in blobs:
                return blobs[self.path[len(prefix):]], {"Content-Type": "application/octet-stream",
                                                        "Docker-Content-Digest": self.path[len(prefix):]}
            return None

        def _reply(self, send_body: bool) -> None:
            found = self._body()
            data, headers = found if found is not None else (b"", {})
            self.send_response(200 if found is not None else 404)
            for k, v in {**headers, "Content-Length": str(len(data))}.items():
                self.send_header(k, v)
            self.end_headers()
            if send_body:
                self.wfile.write(data)

        def do_GET(self) -> None:
            self._reply(True)

        def do_HEAD(self) -> None:
            self._reply(False)

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(str(work / "cert.pem"), str(work / "key.pem"))
    server.socket = context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"127.0.0.1:{server.server_address[1]}/{repository}:{tag}", _digest(manifest), work / "ca.pem"
    finally:
        server.shutdown()
        server.server_close()
