"""Container images in a bundle (bundle/images.py, oci_layout.py, image_push.py, workflows/images_load.py):
an OCI layout sealed into a real signed bundle and verified; an altered blob, a blob name that climbs out of
its layout and a manifest naming a blob the signed entry lacks are refused naming the image; hostile and
clashing references refused before anything; skopeo's fetch run as a stand-in program (a failure and a
timeout name the image, leave nothing); the push against an in-process registry speaking the distribution
API (a second push sends nothing); a bundle with images for a spec without a site registry refused before
a node is contacted. The live path (skopeo, docker-registry, podman) is tests/vcluster/images_bundle.py."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import shutil
import ssl
import tarfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from corral.bundle import build, images, sign
from corral.bundle.image_push import Registry, push
from corral.bundle.oci_layout import entry, layout_dir
from corral.bundle.verify import unpack_verified, verify
from corral.errors import CorralError, HostToolError, UsageError
from corral.spec.image_ref import parse
from corral.spec.loader import load

pytestmark = pytest.mark.skipif(shutil.which("gpg") is None or shutil.which("gpgv") is None,
                                reason="gpg and gpgv sign and check bundles (bootstrap installs them)")

REF = "upstream.example:5000/corral/hello:7"
SPEC = """name: t
ssh: {user: root}
nodes:
  - {names: ctl, addresses: [10.0.0.10], roles: [controller]}
  - {names: gpu01, addresses: [10.0.0.11], roles: [compute], gpus: {model: h100, count: 4}}
nvidia: {dcgm: {enabled: false}}
monitoring: {grafana: {enabled: false}}
"""


def _digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def write_layout(root: Path, ref: str, message: bytes = b"hello") -> None:
    """An OCI image layout as skopeo writes one: oci-layout, index.json, blobs/sha256/<hex>."""
    layout = root / layout_dir(parse(ref))
    (layout / "blobs" / "sha256").mkdir(parents=True)
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as tar:
        info = tarfile.TarInfo("etc/message")
        info.size = len(message)
        tar.addfile(info, io.BytesIO(message))
    layer = gzip.compress(out.getvalue(), mtime=0)
    config = json.dumps({"architecture": "amd64", "os": "linux", "rootfs": {"type": "layers", "diff_ids": [
        _digest(out.getvalue())]}}).encode()
    manifest = json.dumps({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
                           "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                                      "digest": _digest(config), "size": len(config)},
                           "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip",
                                       "digest": _digest(layer), "size": len(layer)}]}).encode()
    for data in (layer, config, manifest):
        (layout / "blobs" / "sha256" / _digest(data)[7:]).write_bytes(data)
    (layout / "oci-layout").write_text('{"imageLayoutVersion": "1.0.0"}')
    (layout / "index.json").write_text(json.dumps({"schemaVersion": 2, "manifests": [{
        "mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": _digest(manifest),
        "size": len(manifest), "annotations": {"org.opencontainers.image.ref.name": "7"}}]}))


@pytest.fixture(scope="module")
def key(tmp_path_factory):
    state = tmp_path_factory.mktemp("state")
    home, fpr = sign.ensure_key(state, "test")
    return state, home, fpr


def sealed(tmp_path: Path, key, change=lambda content: None, name: str = "b.tar") -> Path:
    """A bundle carrying one image (and an empty repository); change(content) edits the manifest first."""
    _, home, fpr = key
    root = tmp_path / f"root-{name}"
    (root / "repo").mkdir(parents=True)
    (root / "repo" / "Packages").write_text("")
    (root / "repo" / "Packages.gz").write_bytes(b"")
    write_layout(root, REF)
    content = {"cluster": "t", "distribution": "debian bookworm", "packages": [],
               "images": [entry(parse(REF), root)]}
    change(content)
    build.seal(root, "t", content, home, fpr, tmp_path / name)
    return tmp_path / name


def test_an_image_is_carried_with_every_blob_in_the_signed_manifest(tmp_path, key):
    _, home, fpr = key
    checked = verify(sealed(tmp_path, key), fpr, home)
    assert checked.ok and checked.images == 1, checked.problems
    item = checked.manifest["images"][0]
    assert (item["ref"], item["repository"], item["tag"]) == (REF, "corral/hello", "7")
    assert item["layout"] == "images/corral+hello+7" and len(item["blobs"]) == 3
    assert all(b["file"] == f"images/corral+hello+7/blobs/sha256/{b['sha256']}" and checked.listed[b["file"]]
               == b["sha256"] for b in item["blobs"])
    assert item["digest"][7:] in {b["sha256"] for b in item["blobs"]}


def test_an_altered_blob_fails_verification_naming_the_image(tmp_path, key):
    _, home, fpr = key
    good = sealed(tmp_path, key)
    bad = tmp_path / "bad.tar"
    with tarfile.open(good) as tin, tarfile.open(bad, "w") as tout:
        for m in tin.getmembers():
            data = tin.extractfile(m).read()
            if "/blobs/sha256/" in m.name and data.startswith(b"\x1f\x8b"):  # the gzipped layer
                data = data[:-1] + bytes([data[-1] ^ 1])
            tout.addfile(m, io.BytesIO(data))
    problems = verify(bad, fpr, home).problems
    assert any(p.startswith(f"image {REF}: blob sha256:") and "altered" in p for p in problems), problems


@pytest.mark.parametrize("hostile", ["images/corral+hello+7/blobs/sha256/../../../../etc/passwd",
                                     "images/other/blobs/sha256/{hex}", "/etc/{hex}"])
def test_a_blob_name_out_of_its_layout_is_refused(tmp_path, key, hostile):
    """The signer's own manifest cannot point a blob anywhere but <layout>/blobs/sha256/<its sha256>."""
    _, home, fpr = key

    def change(content):
        blob = content["images"][0]["blobs"][0]
        blob["file"] = hostile.format(hex=blob["sha256"])
    problems = verify(sealed(tmp_path, key, change), fpr, home).problems
    assert any(p.startswith(f"image {REF}: blob ") and p.endswith("(refused)") for p in problems), problems


def test_a_layout_or_reference_of_the_manifest_is_checked_too(tmp_path, key):
    _, home, fpr = key
    bad_ref = verify(sealed(tmp_path, key, lambda c: c["images"][0].update(ref="x;rm -rf /")), fpr, home)
    assert any("';'" in p for p in bad_ref.problems), bad_ref.problems
    moved = verify(sealed(tmp_path, key, lambda c: c["images"][0].update(layout="images/.."), "m.tar"), fpr, home)
    assert any(p.startswith(f"image {REF}: layout") for p in moved.problems), moved.problems


def test_references_are_typed_before_anything(tmp_path):
    with pytest.raises(UsageError, match="';'"):
        images.refs(["ctl:5000/x;touch /tmp/pwned"])
    with pytest.raises(UsageError, match="a tag is needed"):
        images.refs(["ctl:5000/x@sha256:" + "a" * 64])
    with pytest.raises(UsageError, match="would both be corral/hello:7"):
        images.refs([REF, "other.example/corral/hello:7"])
    assert [str(r) for r in images.refs(["busybox"])] == ["docker.io/library/busybox:latest"]
    f = tmp_path / "cluster.yaml"
    f.write_text(SPEC)
    with pytest.raises(UsageError, match="';'"):  # the build refuses it before looking at anything else
        build.build(load(f), tmp_path / "b.tar", tmp_path / "nothing", images=["a/b;reboot"])
    with pytest.raises(CorralError, match="no site registry") as exc:
        build.build(load(f), tmp_path / "b.tar", tmp_path / "nothing", images=[REF])
    assert exc.value.where == "images.registry" and not (tmp_path / "b.tar").exists()


def skopeo(tmp_path: Path, body: str, monkeypatch) -> Path:
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    (bin_ / "skopeo").write_text("#!/bin/bash\n" + body)
    (bin_ / "skopeo").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_}:/usr/bin:/bin")
    return bin_


def test_the_fetch_runs_skopeo_with_an_argv_and_reads_its_layout(tmp_path, monkeypatch):
    bin_ = skopeo(tmp_path, 'printf "%s\\n" "$@" > "$(dirname "$0")/argv"\n'
                            'dest=${!#}; dest=${dest#oci:}; dest=${dest%:*}\n'
                            f'cp -r {tmp_path}/made/images/corral+hello+7/. "$dest"\n', monkeypatch)
    write_layout(tmp_path / "made", REF)
    root = tmp_path / "root"
    item = images.fetch(parse(REF), root)
    assert item == entry(parse(REF), tmp_path / "made")
    argv = (bin_ / "argv").read_text().splitlines()
    assert argv[-2:] == [f"docker://{REF}", f"oci:{root}/images/corral+hello+7:7"] and "copy" in argv
    pinned = parse("upstream.example:5000/corral/hello:7@sha256:" + "b" * 64)
    assert images.source(pinned) == "docker://upstream.example:5000/corral/hello@sha256:" + "b" * 64


def test_a_failed_or_stuck_fetch_names_the_image_and_leaves_nothing(tmp_path, monkeypatch):
    skopeo(tmp_path, 'mkdir -p "${!##oci:}"; echo "manifest unknown" >&2; exit 1\n', monkeypatch)
    with pytest.raises(HostToolError, match=f"image {REF}: skopeo copy failed: manifest unknown"):
        images.fetch(parse(REF), tmp_path / "root")
    assert not (tmp_path / "root" / "images" / "corral+hello+7").exists()
    (tmp_path / "bin" / "skopeo").write_text("#!/bin/bash\nsleep 30\n")
    with pytest.raises(HostToolError, match=f"image {REF}: skopeo copy did not finish within 1 s"):
        images.fetch(parse(REF), tmp_path / "root", timeout=1)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(HostToolError, match="skopeo is not installed"):
        images.fetch(parse(REF), tmp_path / "root")


def test_a_layout_whose_index_names_a_blob_out_of_it_is_refused(tmp_path, monkeypatch):
    """What skopeo wrote is read by digest only: an index naming `sha256:../..` opens nothing."""
    write_layout(tmp_path / "made", REF)
    index = tmp_path / "made" / "images" / "corral+hello+7" / "index.json"
    data = json.loads(index.read_text())
    data["manifests"][0]["digest"] = "sha256:../../../../etc/passwd"
    index.write_text(json.dumps(data))
    skopeo(tmp_path, 'dest=${!#}; dest=${dest#oci:}; dest=${dest%:*}\n'
                     f'cp -r {tmp_path}/made/images/corral+hello+7/. "$dest"\n', monkeypatch)
    with pytest.raises(CorralError, match=f"image {REF}: the layout skopeo wrote is refused \\(not a sha256 "
                                          "digest: 'sha256:../../../../etc/passwd'\\)"):
        images.fetch(parse(REF), tmp_path / "root")
    assert not (tmp_path / "root" / "images" / "corral+hello+7").exists()


class FakeRegistry(BaseHTTPRequestHandler):
    """The distribution API's push subset, over plain HTTP: blobs checked against their digest."""
    blobs: dict[str, bytes] = {}
    manifests: dict[str, bytes] = {}
    requests: list[str] = []

    def log_message(self, *args) -> None:
        pass

    def _reply(self, code: int, headers: dict | None = None) -> None:
        self.send_response(code)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_HEAD(self) -> None:
        self.requests.append(f"HEAD {self.path}")
        kind, _, ref = self.path.rpartition("/")
        if kind.endswith("/manifests") and self.path in self.manifests:
            return self._reply(200, {"Docker-Content-Digest": _digest(self.manifests[self.path])})
        self._reply(200 if kind.endswith("/blobs") and ref in self.blobs else 404)

    def do_POST(self) -> None:
        self.requests.append(f"POST {self.path}")
        self._reply(202, {"Location": "/upload/1?state=x"})

    def do_PUT(self) -> None:
        self.requests.append(f"PUT {self.path.split('?')[0]}")
        data = self.rfile.read(int(self.headers["Content-Length"]))
        if self.path.startswith("/upload/"):
            digest = self.path.split("digest=")[1]
            if _digest(data) != digest:
                return self._reply(400)
            self.blobs[digest] = data
            return self._reply(201)
        self.manifests[self.path.replace("/manifests/", "/manifests/", 1)] = data
        self._reply(201, {"Docker-Content-Digest": _digest(data)})


@pytest.fixture
def registry():
    FakeRegistry.blobs, FakeRegistry.manifests, FakeRegistry.requests = {}, {}, []
    server = ThreadingHTTPServer(("127.0.0.1", 0), FakeRegistry)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield Registry(f"http://127.0.0.1:{server.server_port}", ssl.create_default_context())
    server.shutdown()


def parts(root: Path, item: dict) -> dict:
    """The image manifest's config and first layer digests (without sha256:)."""
    manifest = json.loads((root / f"{item['layout']}/blobs/sha256/{item['digest'][7:]}").read_bytes())
    return {"config": manifest["config"]["digest"][7:], "layer": manifest["layers"][0]["digest"][7:]}


def unpacked(tmp_path: Path, key, change=lambda content: None) -> tuple[Path, dict]:
    _, home, fpr = key
    path = sealed(tmp_path, key, change)
    checked = verify(path, fpr, home)
    return unpack_verified(path, checked, tmp_path / "unpacked"), checked.manifest["images"][0]


def test_a_push_sends_every_blob_then_the_manifest_and_a_second_sends_nothing(tmp_path, key, registry):
    root, item = unpacked(tmp_path, key)
    assert push(registry, item, root) is True
    assert FakeRegistry.requests[-1] == "PUT /v2/corral/hello/manifests/7"
    assert len(FakeRegistry.blobs) == 2 and _digest(FakeRegistry.manifests["/v2/corral/hello/manifests/7"]) \
        == item["digest"]
    FakeRegistry.requests.clear()
    assert push(registry, item, root) is False  # the registry serves the carried digest: nothing sent
    assert FakeRegistry.requests == ["HEAD /v2/corral/hello/manifests/7"]


def test_a_push_refuses_a_manifest_naming_a_blob_the_signed_entry_lacks(tmp_path, key, registry):
    def drop_config(content):
        item = content["images"][0]
        config = parts(tmp_path / "root-b.tar", item)["config"]
        item["blobs"] = [b for b in item["blobs"] if b["sha256"] != config]
    root, item = unpacked(tmp_path, key, drop_config)
    with pytest.raises(CorralError, match=f"image {REF}: its manifest names blob 'sha256:.*', which the signed "
                                          "manifest does not list"):
        push(registry, item, root)
    assert not FakeRegistry.manifests


def test_a_push_that_the_registry_refuses_names_the_image(tmp_path, key, registry):
    root, item = unpacked(tmp_path, key)
    layer = parts(root, item)["layer"]
    (root / f"{item['layout']}/blobs/sha256/{layer}").write_bytes(b"changed on disk after the bundle was verified")
    with pytest.raises(CorralError, match=f"image {REF}: PUT .*: HTTP 400"):
        push(registry, item, root)
    assert not FakeRegistry.manifests


def test_a_bundle_with_images_for_a_spec_without_a_site_registry_is_refused_first(tmp_path, key):
    from corral.workflows.converge import converge
    _, _, fpr = key
    bundle = sealed(tmp_path, key)
    f = tmp_path / "cluster.yaml"
    f.write_text(SPEC + f"packages: {{source: bundle, serve: 10.0.0.1:8079, bundle: {bundle.name}, "
                        f"fingerprint: {fpr}}}\n")
    from corral.workflows.images_load import refuse_without_registry
    with pytest.raises(CorralError, match="packages.bundle carries 1 container image") as exc:
        refuse_without_registry(load(f))
    assert exc.value.where == "images.registry"
    with pytest.raises(CorralError, match="no site registry"):
        converge(load(f), "apply")  # 10.0.0.x is never contacted: refused before
    assert not (tmp_path / ".corral" / "bundle").exists()  # nothing unpacked either


def test_the_cli_refuses_a_hostile_reference_with_its_json_object_and_exit_2(tmp_path):
    import os
    import subprocess
    import sys
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2] / "src"), "CORRAL_SPEC": str(tmp_path / "none")}
    done = subprocess.run([sys.executable, "-m", "corral", "bundle", "build", "--images", "busybox",
                           "--images", "ctl:5000/x$(reboot)", "-o", str(tmp_path / "b.tar"), "--json"],
                          capture_output=True, text=True, env=env, cwd=tmp_path, timeout=60)
    assert done.returncode == 2, done.stderr
    got = json.loads(done.stdout)
    assert got["ok"] is False and "'$'" in got["error"] and "'('" in got["error"], got
    assert not (tmp_path / "b.tar").exists() and list(tmp_path.iterdir()) == []


def test_the_site_registry_is_reached_as_its_certificate_names_it(tmp_path):
    from corral.workflows.images_load import site_registry
    f = tmp_path / "cluster.yaml"
    f.write_text(SPEC + "images: {podman: true, registry: {node: ctl, port: 5000}}\n")
    registry, shown = site_registry(load(f))  # corral's CA signed it for the node's name and address
    assert (registry.base, shown) == ("https://10.0.0.10:5000", "ctl:5000")
    assert registry.context.get_ca_certs()[0]["subject"] == ((("commonName", "corral CA of t"),),)
    (tmp_path / "site.pem").write_text("x")
    (tmp_path / "site.key").write_text("x")
    (tmp_path / "site.key").chmod(0o600)
    f.write_text(SPEC + "images: {podman: true, registry: {node: ctl, port: 5443, tls: {cert_file: site.pem, "
                        "key_file: site.key}}}\n")
    registry, shown = site_registry(load(f))  # the site's certificate names the node; this host trusts its CA
    assert (registry.base, shown) == ("https://ctl:5443", "ctl:5443")


def test_up_with_a_bundle_carrying_images_and_no_site_registry_starts_no_node(tmp_path, key):
    from corral.workflows.up import start_virtual
    _, _, fpr = key
    bundle = sealed(tmp_path, key)
    with pytest.raises(CorralError, match="packages.bundle carries 1 container image") as exc:
        start_virtual(tmp_path / "site", bundle=bundle, fingerprint=fpr)  # the default spec has no registry
    assert exc.value.where == "images.registry"
    # the default spec (and alice's key) written for the admin to add images.registry to; nothing else
    assert sorted(p.name for p in (tmp_path / "site" / ".corral").iterdir()) == ["ssh"]


def test_diff_names_images_added_removed_and_at_another_digest():
    from corral.bundle import diff

    def img(repo: str, digest: str) -> dict:
        return {"ref": f"nvcr.io/{repo}:1", "repository": repo, "tag": "1", "digest": digest}
    a = {"packages": [], "images": [img("nvidia/pytorch", "sha256:" + "a" * 64), img("old/tool", "sha256:" + "b" * 64)]}
    b = {"packages": [], "images": [img("nvidia/pytorch", "sha256:" + "c" * 64), img("new/tool", "sha256:" + "d" * 64)]}
    d = diff.diff(a, b)
    assert not d["same"] and diff.lines(d) == [
        f"+ image new/tool:1 sha256:{'d' * 64}  (from nvcr.io/new/tool:1)", f"- image old/tool:1 sha256:{'b' * 64}",
        f"~ image nvidia/pytorch:1 sha256:{'a' * 64} -> sha256:{'c' * 64}"]
    assert diff.diff(b, b)["same"]


def test_plan_shows_every_image_as_to_be_pushed_while_the_registry_does_not_answer(tmp_path, key):
    """plan's view (workflows/images_load.py load in plan mode): the registry asked, nothing sent; a registry
    that does not answer yet (before its first apply) means each image would be pushed."""
    import socket
    from corral.engine.results import NodeResult, RunResult
    from corral.workflows.images_load import load as load_images
    _, _, fpr = key
    bundle = sealed(tmp_path, key)
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    f = tmp_path / "cluster.yaml"
    f.write_text(SPEC.replace("10.0.0.10", "127.0.0.1") + f"images: {{registry: {{node: ctl, port: {port}}}}}\n"
                 f"packages: {{source: bundle, serve: 127.0.0.1:8079, bundle: {bundle.name}, fingerprint: {fpr}}}\n")
    result = RunResult(run_id="t", command="plan", mode="plan", spec_hash="", started="")
    result.nodes["ctl"] = NodeResult("ctl", "127.0.0.1")
    assert load_images(load(f), result)
    [op] = result.nodes["ctl"].ops
    assert (op.name, op.status) == (f"image ctl:{port}/corral/hello:7 from the bundle", "changed")
    assert op.reason.startswith("the site registry does not answer (HEAD https://127.0.0.1:")
    assert result.ok
    result = RunResult(run_id="t", command="plan", mode="plan", spec_hash="", started="")
    assert not load_images(load(f), result) and result.warnings == [
        "the bundle's 1 image(s) not checked: the registry node ctl was not in this run"]


def test_up_with_a_bundle_in_a_new_directory_makes_nodes_of_the_bundles_release(tmp_path, key):
    """A new virtual cluster is Debian 13 unless its bundle serves another release: a Debian 12 bundle gives
    Debian 12 nodes (its manifest's distribution, matched against corral's own table)."""
    from corral.workflows.up import bundle_release, start_virtual
    _, _, fpr = key
    bundle = sealed(tmp_path, key)
    assert bundle_release(bundle) == "debian-12"  # sealed() builds a bookworm bundle
    with pytest.raises(CorralError, match="packages.bundle carries 1 container image"):
        start_virtual(tmp_path / "site", bundle=bundle, fingerprint=fpr)  # refused later: no site registry
    assert {g.os for g in load(tmp_path / "site" / "cluster.yaml").spec.nodes} == {"debian-12"}
