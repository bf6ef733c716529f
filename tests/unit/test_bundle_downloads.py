"""A bundle's pinned downloads (bundle/downloads.py): what the spec downloads, fetched and checked at
build time from a loopback server, stored under canonical names, and what the nodes are told to fetch
instead (the served bundle's copy, checked against the spec's pin or the manifest's record)."""

from __future__ import annotations

import hashlib
import http.server
import io
import json
import tarfile
import threading

import pytest

from corral.bundle import downloads
from corral.bundle.coverage import gaps
from corral.errors import CorralError, HostToolError
from corral.render.containers import pyxis_build_script
from corral.render.debs import release_debs_script
from corral.spec.loader import load

SPEC = """name: t
allow_http: true
nodes:
  - {{names: ctl, addresses: [10.0.0.10], roles: [controller]}}
  - {{names: gpu01, addresses: [10.0.0.11], roles: [compute], gpus: {{model: h100, count: 4}}}}
nvidia:
  dcgm: {{enabled: false}}
  enroot:
    version: 3.5.0
    url: "{base}/{{package}}_{{version}}-1_{{arch}}.deb"
    sha256: {enroot_sums}
  pyxis: {{version: 0.20.0, url: "{base}/pyxis-v{{version}}.tar.gz", sha256: "{pyxis_sum}"}}
monitoring: {{grafana: {{enabled: false}}}}
{packages}"""
FILES = {"enroot_3.5.0-1_amd64.deb": b"enroot deb", "enroot+caps_3.5.0-1_amd64.deb": b"caps deb",
         "pyxis-v0.20.0.tar.gz": b"pyxis source"}


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@pytest.fixture(scope="module")
def server():
    class Files(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - http.server's name
            data = FILES.get(self.path.lstrip("/"))
            self.send_response(200 if data is not None else 404)
            self.end_headers()
            self.wfile.write(data or b"")

        def log_message(self, *args):
            pass
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Files)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


def spec(tmp_path, base="https://example.org/x", enroot_sums=None, pyxis_sum=None, packages=""):
    sums = enroot_sums or {"enroot": sha(b"enroot deb"), "enroot+caps": sha(b"caps deb")}
    f = tmp_path / "cluster.yaml"
    f.write_text(SPEC.format(base=base, enroot_sums=json.dumps(sums), pyxis_sum=pyxis_sum or sha(b"pyxis source"),
                             packages=packages))
    return load(f)


def test_what_the_spec_downloads_with_canonical_names(tmp_path):
    got = downloads.wanted(spec(tmp_path))
    assert [(d.key, d.package, d.url, d.file) for d in got] == [
        ("nvidia.enroot", "enroot", "https://example.org/x/enroot_3.5.0-1_amd64.deb",
         "repo/downloads/enroot/enroot_3.5.0_amd64.deb"),
        ("nvidia.enroot", "enroot+caps", "https://example.org/x/enroot+caps_3.5.0-1_amd64.deb",
         "repo/downloads/enroot/enroot+caps_3.5.0_amd64.deb"),
        ("nvidia.pyxis", None, "https://example.org/x/pyxis-v0.20.0.tar.gz", "repo/downloads/pyxis/pyxis-0.20.0.tar.gz")]
    assert got[0].sha256 == sha(b"enroot deb")
    skipped = downloads.wanted(spec(tmp_path, enroot_sums="skip", pyxis_sum="skip"))
    assert [d.sha256 for d in skipped] == [None, None, None]


def test_fetched_and_checked_against_the_spec(tmp_path, server):
    said = []
    entries = downloads.fetch_all(spec(tmp_path, base=server), tmp_path / "b", said.append)
    assert [(e["file"], e["sha256"], e["size"], e["why"]) for e in entries] == [
        ("repo/downloads/enroot/enroot+caps_3.5.0_amd64.deb", sha(b"caps deb"), 8, ["nvidia.enroot"]),
        ("repo/downloads/enroot/enroot_3.5.0_amd64.deb", sha(b"enroot deb"), 10, ["nvidia.enroot"]),
        ("repo/downloads/pyxis/pyxis-0.20.0.tar.gz", sha(b"pyxis source"), 12, ["nvidia.pyxis"])]
    assert (tmp_path / "b/repo/downloads/pyxis/pyxis-0.20.0.tar.gz").read_bytes() == b"pyxis source"
    assert said == []
    with pytest.raises(HostToolError, match=r"pyxis-v0.20.0.tar.gz \(nvidia.pyxis\) has sha256 "
                                            + sha(b"pyxis source") + ", not the spec's " + "0" * 64):
        downloads.fetch_all(spec(tmp_path, base=server, pyxis_sum="0" * 64), tmp_path / "c")
    assert not (tmp_path / "c/repo/downloads/pyxis/pyxis-0.20.0.tar.gz").exists()
    assert not list((tmp_path / "c/repo/downloads/pyxis").glob(".partial-*"))
    downloads.fetch_all(spec(tmp_path, base=server, pyxis_sum="skip"), tmp_path / "d", said.append)
    assert said == [f"nvidia.pyxis: pyxis-0.20.0.tar.gz taken unchecked (sha256: skip); the nodes will check it "
                    f"against the bundle's recorded {sha(b'pyxis source')[:16]}..."]
    FILES.pop("enroot+caps_3.5.0-1_amd64.deb")
    try:
        with pytest.raises(HostToolError, match=r"cannot download .*enroot\+caps_3.5.0-1_amd64.deb"):
            downloads.fetch_all(spec(tmp_path, base=server), tmp_path / "e")
    finally:
        FILES["enroot+caps_3.5.0-1_amd64.deb"] = b"caps deb"


def bundle_with(tmp_path, entries) -> str:
    data = json.dumps({"packages": [], "downloads": entries}).encode()
    with tarfile.open(tmp_path / "b.tar", "w") as tar:
        info = tarfile.TarInfo("manifest.json")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    return "packages: {source: bundle, serve: '10.0.0.1:8079', bundle: b.tar, fingerprint: " + "A" * 40 + "}\n"


def test_the_nodes_fetch_the_bundles_copy_checked(tmp_path):
    plain = spec(tmp_path)
    assert downloads.bundled(plain, ("nvidia", "enroot")) is plain.spec.nvidia.enroot
    recorded = [{"file": "repo/downloads/pyxis/pyxis-0.20.0.tar.gz", "sha256": "b" * 64},
                {"file": "repo/downloads/enroot/enroot+caps_3.5.0_amd64.deb", "sha256": "c" * 64}]
    cluster = spec(tmp_path, enroot_sums="skip", pyxis_sum="skip",
                   packages=bundle_with(tmp_path, recorded))
    enroot = downloads.bundled(cluster, ("nvidia", "enroot"))
    assert enroot.url == "http://10.0.0.1:8079/downloads/enroot/{package}_{version}_{arch}.deb"
    assert enroot.sha256 == {"enroot+caps": "c" * 64}  # enroot itself: not recorded, so refused on the node
    script = release_debs_script("enroot", "nvidia.enroot.sha256", enroot.packages, enroot.version, enroot.url,
                                 enroot.sha256)
    assert 'http://10.0.0.1:8079/downloads/enroot/enroot+caps_3.5.0_"$arch".deb' in script
    assert "example.org" not in script and "no sha256 for enroot in nvidia.enroot.sha256" in script
    pyxis = downloads.bundled(cluster, ("nvidia", "pyxis"))
    assert (pyxis.url, pyxis.sha256) == ("http://10.0.0.1:8079/downloads/pyxis/pyxis-{version}.tar.gz", "b" * 64)
    assert " http://10.0.0.1:8079/downloads/pyxis/pyxis-0.20.0.tar.gz " in pyxis_build_script(pyxis)
    pinned = spec(tmp_path, packages=bundle_with(tmp_path, recorded))
    assert downloads.bundled(pinned, ("nvidia", "pyxis")).sha256 == sha(b"pyxis source")  # the spec's pin wins


def test_virtual_nodes_fetch_from_the_bridge(tmp_path):
    f = tmp_path / "cluster.yaml"
    f.write_text("name: v\nvirtual: {subnet: 10.213.90.0/24, repo_port: 18099}\nnodes:\n"
                 "  - {names: ctl, addresses: [10.213.90.10], roles: [controller, compute]}\n")
    assert downloads.served_url(load(f)) == "http://10.213.90.1:18099/"


def test_coverage_names_a_missing_or_different_download(tmp_path):
    cluster = spec(tmp_path)
    everything = [{"file": d.file, "sha256": d.sha256} for d in downloads.wanted(cluster)]

    def download_gaps(entries):
        return {n: [g for g in v if ".deb (" in g or "tar.gz (" in g]
                for n, v in gaps(cluster, {"packages": [], "downloads": entries}).items()}
    assert download_gaps(everything) == {"ctl": [], "gpu01": []}
    assert download_gaps(everything[1:2]) == {
        "ctl": ["needs pyxis-0.20.0.tar.gz (nvidia.pyxis): not in the bundle"],
        "gpu01": ["needs enroot_3.5.0_amd64.deb (nvidia.enroot): not in the bundle",
                  "needs pyxis-0.20.0.tar.gz (nvidia.pyxis): not in the bundle"]}
    changed = [dict(e, sha256="f" * 64) if e["file"].endswith(".tar.gz") else e for e in everything]
    assert download_gaps(changed)["ctl"] == ["needs pyxis-0.20.0.tar.gz (nvidia.pyxis): the bundle's copy differs "
                                             "from nvidia.pyxis.sha256"]


def test_a_bundle_now_carries_enroot_and_pyxis(tmp_path):
    cluster = spec(tmp_path, packages="packages: {source: bundle, serve: '10.0.0.1:8079', bundle: b.tar}\n")
    assert cluster.spec.packages.source == "bundle"
    f = tmp_path / "cluster.yaml"
    f.write_text(f.read_text().replace(  # the container toolkit too, from its repository (bundle/vendor.py)
        "  dcgm: {enabled: false}\n", "  dcgm: {enabled: false}\n  container_toolkit: {}\n"))
    assert load(f).spec.nvidia.container_toolkit is not None
