"""Air-gapped install, end to end: `corral bundle build` on the control host (it has the registries), then
`corral up --bundle` builds the virtual cluster from the bundle alone: corral's on-the-fly repository is
neither filled nor served, apt on the nodes takes only the bundle's signed repository, validate passes,
and a second apply changes nothing. A bundle with one .deb altered is named by verify and refused by up.
A site proxy (spec `proxy:`) then carries apt and a user's download, and goes again with the spec."""

from __future__ import annotations

import hashlib
import http.server
import io
import json
import shlex
import tarfile
import threading
import urllib.error
import urllib.parse
import urllib.request

import pytest

from corral.bundle.build import build
from corral.bundle.verify import verify
from corral.errors import CorralError
from corral.spec.loader import load
from corral.virtual import image, network, repo
from corral.workflows.converge import converge
from corral.workflows.up import bundle_section, up
from tests.vcluster.standin import (CUDA_TOOLKIT_VERSION, PACKAGE, build_cuda_repo, build_cuda_toolkit_deb, build_deb,
                                    build_enroot_deb, serve_dir)
from tests.vcluster.oci_image import ANONYMOUS_GET
from tests.vcluster.test_users import as_alice
from tests.vcluster.upstream_registry import image as upstream_manifest, upstream_image
from tests.vcluster.conftest import TEST_PORT, TEST_SUBNET, failures, make_spec, ssh, vcluster_unavailable

pytestmark = pytest.mark.vcluster


ENROOT = """allow_http: true
nvidia:
  driver: {{version: "1.0", package: corral-test-nvidia-driver, repo_url: "{url}/cuda", repo_fingerprint: {fpr}}}
  enroot:
    version: 1.0.0
    packages: [corral-test-enroot]
    url: "{url}/{{package}}_{{version}}_{{arch}}.deb"
    sha256: {{corral-test-enroot: {sha}}}
  cuda_toolkit: {{version: "{cuda}"}}
software: {{openmpi: false}}
"""


IMAGE_TEXT = "carried through the air gap\n"


def _files(directory):
    """The build host's download site: a loopback server, gone before any node starts."""
    return serve_dir(directory, TEST_PORT + 9)


@pytest.fixture(scope="module")
def air(tmp_path_factory):
    reason = vcluster_unavailable()
    if reason:
        pytest.skip(reason)
    d = tmp_path_factory.mktemp("air")
    spec = make_spec(d, name="air", compute=1, usable=True, os_name="debian-12")  # a Debian 12 bundle: NVIDIA's repos
    deb = build_enroot_deb(d / "files", "1.0.0")  # a pinned download, served to the build host only
    # NVIDIA's CUDA repository, a signed TEST stand-in (its own key, pinned by the spec as a mirror's would be)
    fpr = build_cuda_repo(d / "files" / "cuda", [build_deb(d / "driver", "1.0"), build_cuda_toolkit_deb(d / "driver")],
                          d / "cuda-key")
    # /sw shared beside /home, for software: (Lmod, the cuda module of the toolkit the bundle carries)
    spec.write_text(spec.read_text().replace("    - {path: /srv/nfs/home}\n", "    - {path: /srv/nfs/home}\n"
                                             "    - {path: /srv/nfs/sw}\n", 1).replace(
        "roles: [controller, compute, login]}\n", "roles: [controller, compute, login]}\n"
        "    - {path: /sw, export: /srv/nfs/sw, roles: [compute, login]}\n", 1))
    # a container image (--images) from an upstream registry the build host reaches (tests/vcluster/
    # upstream_registry.py), for the site registry on ctl
    with _files(d / "files") as url, upstream_image(d / "files", "upstream/hello", "7", IMAGE_TEXT) as up_image, \
            pytest.MonkeyPatch.context() as env:
        spec.write_text(spec.read_text() + ENROOT.format(url=url, sha=hashlib.sha256(deb.read_bytes()).hexdigest(),
                                                         fpr=fpr, cuda=CUDA_TOOLKIT_VERSION)
                        + "images: {registry: {node: ctl}}\n")
        env.setenv("SSL_CERT_FILE", str(up_image[2]))  # skopeo trusts the upstream's CA
        built = build(load(spec), d / "air.tar", image.release_status(image.ensure_image()), repo.REPO / "pool",
                      image=image.ensure_image(), images=[up_image[0]])  # --with-virtual, --images
    spec.write_text(spec.read_text() + bundle_section(built.path, None))  # signer: this state dir's own key
    patch = pytest.MonkeyPatch()
    patch.setattr(repo, "ensure_repo", lambda *a, **k: pytest.fail("the on-the-fly repository was filled"))
    # a host without the node base image and without a Debian mirror: the image comes from the bundle
    patch.setattr(image, "CACHE", d / "image-cache")
    patch.setattr(image, "debian_mirror", lambda *a: pytest.fail("the base image was debootstrapped"))
    result = None
    try:
        result = up(d, bundle=built.path)
        yield d, built, result
    finally:
        patch.undo()
        from corral.virtual.cluster import VirtualCluster
        VirtualCluster(load(spec)).down()


def test_up_from_the_bundle_alone_validates(air):
    d, built, result = air
    assert result.apply.ok, failures(result.apply)
    assert result.validate is not None and result.validate.ok, [c.to_json() for c in result.validate.checks
                                                                if not c.ok]
    assert built.packages > 50 and verify(built.path, built.fingerprint).ok
    # --with-virtual: the nodes run on the base image unpacked from the bundle (this host had none)
    with tarfile.open(built.path) as tar:
        carried = json.loads(tar.extractfile("manifest.json").read())["virtual"]
    unpacked = d / "image-cache" / "images" / carried["image"]
    assert (unpacked / "etc/corral-image").is_file() and carried["file"] == f"virtual/{carried['image']}.tar"
    mounts = open("/proc/self/mountinfo").read()
    assert f"lowerdir={unpacked}" in mounts, "the nodes' overlays are not on the carried image"


def test_up_loads_the_bundled_image_into_the_site_registry(air):
    """`up --bundle` pushed the carried image into the site registry after the components (an op of ctl);
    a node gets it from there by the digest the upstream served (the upstream is long gone); plan sees it
    there."""
    d, built, result = air
    ops = [(o.name, o.status) for o in result.apply.nodes["ctl"].ops if o.name.startswith("image ")]
    assert ops == [("image ctl:5000/upstream/hello:7 from the bundle", "changed")], ops
    from corral.virtual.cluster import VirtualCluster
    served = hashlib.sha256(upstream_manifest(IMAGE_TEXT)[0]).hexdigest()  # what the upstream served
    fetch = ANONYMOUS_GET + ("import hashlib; print(hashlib.sha256(get('https://ctl:5000/v2/upstream/hello/manifests/"
                             "7', 'application/vnd.oci.image.manifest.v1+json')).hexdigest())")  # trusting the CA
    got = ssh(VirtualCluster(load(d / "cluster.yaml")), "gpu01", f"python3 -c {shlex.quote(fetch)}").stdout.strip()
    assert got == served
    plan = converge(load(d / "cluster.yaml"), "plan", command="test-bundle-plan")  # asks the registry, sends nothing
    assert [(o.name, o.status) for o in plan.nodes["ctl"].ops if o.name.startswith("image ")] == [
        ("image ctl:5000/upstream/hello:7 from the bundle", "unchanged")]


def test_nodes_take_only_the_bundles_signed_repository(air):
    d, built, result = air
    from corral.virtual.cluster import VirtualCluster
    vc = VirtualCluster(load(d / "cluster.yaml"))
    served = vc.load_state()["repo_dir"]
    assert served.startswith(str(d / ".corral" / "bundle")) and served.endswith("/repo")
    url = f"http://{network.host_address(TEST_SUBNET)}:{TEST_PORT}"
    with pytest.raises(urllib.error.HTTPError):  # the on-the-fly repository's own index is not what is served
        urllib.request.urlopen(f"{url}/corral-packages.txt", timeout=5)
    for node in ("ctl", "gpu01", "login1"):
        sources = ssh(vc, node, "cat /etc/apt/sources.list; ls /etc/apt/sources.list.d").stdout
        assert sources.strip() == f"deb [signed-by=/etc/apt/keyrings/corral-virtual-bundle.gpg] {url}/ ./", sources
    # apt checks the signature: the InRelease the nodes fetched verifies with the bundle's key
    policy = ssh(vc, "gpu01", "apt-get update 2>&1; apt-cache policy slurmd").stdout
    assert "NO_PUBKEY" not in policy and "not signed" not in policy and "Candidate:" in policy
    # the keyring apt trusts for it is the pinned key alone (never the file the bundle carries), and the
    # InRelease it accepted has a Valid-Until (a replayed old one is refused once expired)
    import base64
    from corral.bundle.sign import primary_fingerprints
    ring = base64.b64decode(ssh(vc, "gpu01", "base64 -w0 /etc/apt/keyrings/corral-virtual-bundle.gpg").stdout)
    assert primary_fingerprints(ring) == [built.fingerprint]
    assert "Valid-Until: " in ssh(vc, "gpu01", "cat /var/lib/apt/lists/*_InRelease").stdout


def test_pinned_downloads_come_from_the_bundle(air):
    """enroot's release .deb was fetched by the build host (its loopback site is gone since), carried in the
    bundle, and installed on the compute node from the bundle's copy, checked against the spec's pin."""
    d, built, _ = air
    with tarfile.open(built.path) as tar:
        entries = json.loads(tar.extractfile("manifest.json").read())["downloads"]
    assert [(e["file"], e["why"]) for e in entries] == [
        ("repo/downloads/enroot/corral-test-enroot_1.0.0_amd64.deb", ["nvidia.enroot"])]
    from corral.virtual.cluster import VirtualCluster
    vc = VirtualCluster(load(d / "cluster.yaml"))
    assert ssh(vc, "gpu01", "enroot version").stdout.strip() == "1.0.0"
    log = (d / ".corral" / "logs" / "repo-http.log").read_text()
    assert '"GET /downloads/enroot/corral-test-enroot_1.0.0_amd64.deb HTTP/1.1" 200' in log


def test_the_driver_comes_from_the_cuda_repository_through_the_bundle(air):
    """nvidia.driver from NVIDIA's CUDA repository (a signed stand-in on the build host's loopback, gone since):
    the build fetched cuda-keyring, checked its key against the spec's fingerprint, resolved the pinned driver
    from that repository, and the bundle carries it; the rollout installed it on gpu01 from the bundle's
    repository (no CUDA source on the node) and rebooted into it."""
    d, built, result = air
    with tarfile.open(built.path) as tar:
        content = json.loads(tar.extractfile("manifest.json").read())
    entry = next(p for p in content["packages"] if p["package"] == PACKAGE)
    assert (entry["version"], entry["why"], entry["file"]) == ("1.0-1", ["nvidia.driver"],
                                                               f"repo/pool/{PACKAGE}_1.0-1_all.deb")
    assert [(r["name"], r["source"].rsplit("/cuda/", 1)[1], r["fingerprint"], r["packages"])
            for r in content["repositories"]] == [("NVIDIA CUDA repository", "debian12/x86_64/ /",
                                                   load(d / "cluster.yaml").spec.nvidia.driver.repo_fingerprint,
                                                   sorted([PACKAGE, CUDA]))]
    from corral.virtual.cluster import VirtualCluster
    vc = VirtualCluster(load(d / "cluster.yaml"))
    assert ssh(vc, "gpu01", "nvidia-smi --query-gpu=driver_version --format=csv,noheader | sort -u").stdout.strip() == "1.0"
    assert [s for s in (o.name.split(" | ")[1] for o in result.apply.nodes["gpu01"].ops
                        if o.name.startswith("driver rollout |"))] == [
        "drain", "wait for jobs", "install", "reboot", "verify", "resume"]
    log = (d / ".corral" / "logs" / "repo-http.log").read_text()
    assert f'"GET /pool/{PACKAGE}_1.0-1_all.deb HTTP/1.1" 200' in log


CUDA = "cuda-toolkit-" + CUDA_TOOLKIT_VERSION.replace(".", "-")


def test_module_load_cuda_as_alice_in_her_shell_and_her_job(air):
    """nvidia.cuda_toolkit from the CUDA repository (the signed stand-in) through the bundle: installed on the
    login and compute nodes, and the `cuda` module corral writes where it installed it works for alice the
    same in a login shell on login1 and in her batch job on gpu01 (its nvcc is a TEST stand-in)."""
    d, built, _ = air
    from corral.virtual.cluster import VirtualCluster
    vc = VirtualCluster(load(d / "cluster.yaml"))
    with tarfile.open(built.path) as tar:
        content = json.loads(tar.extractfile("manifest.json").read())
    assert next(p for p in content["packages"] if p["package"] == CUDA)["why"] == ["nvidia.cuda_toolkit"]
    want = f"release {CUDA_TOOLKIT_VERSION}"
    shell = as_alice(vc, "login1", "bash -lc 'module -t avail 2>&1; module load cuda && nvcc --version && "
                                   "echo HOME=$CUDA_HOME && module -t list 2>&1'").stdout
    assert f"cuda/{CUDA_TOOLKIT_VERSION}" in shell and want in shell, shell
    assert f"HOME=/usr/local/cuda-{CUDA_TOOLKIT_VERSION}" in shell, shell
    script = "#!/bin/bash -l\nmodule load cuda && nvcc --version && hostname\n"
    as_alice(vc, "login1", f"printf '%s' {shlex.quote(script)} > ~/cuda.sh")
    job = as_alice(vc, "login1", "cd ~ && sbatch --parsable --wait -w gpu01 -t 2 --output=cuda-%j.out cuda.sh").stdout.strip()
    out = as_alice(vc, "login1", f"cat ~/cuda-{job}.out").stdout
    assert want in out and "gpu01" in out, out
    assert ssh(vc, "ctl", f"test -e /usr/local/cuda-{CUDA_TOOLKIT_VERSION}", check=False).returncode != 0, \
        "the toolkit went to a node that is neither compute nor login"


def test_a_second_apply_changes_nothing(air):
    d, _, _ = air
    again = converge(load(d / "cluster.yaml"), "apply", command="test-bundle-noop")
    assert again.ok and again.changed == 0, [(n, o.name) for n, r in again.nodes.items() for o in r.ops
                                             if o.status != "unchanged"]


def test_an_altered_deb_is_named_and_refused(air, tmp_path):
    d, built, _ = air
    bad = tmp_path / "bad.tar"
    with tarfile.open(built.path) as tin, tarfile.open(bad, "w") as tout:
        victim = next(m.name for m in tin.getmembers() if m.name.startswith("repo/pool/slurmd_"))
        for m in tin.getmembers():
            data = tin.extractfile(m).read()
            if m.name == victim:
                data = data[:-1] + bytes([data[-1] ^ 1])
            tout.addfile(m, io.BytesIO(data))
    checked = verify(bad, built.fingerprint)
    assert checked.problems == [f"{victim}: sha256 differs from SHA256SUMS (altered or truncated)"]
    spec = tmp_path / "cluster.yaml"
    spec.write_text((d / "cluster.yaml").read_text().replace(str(built.path), str(bad))
                    + f"  fingerprint: {built.fingerprint}\n")
    from corral.virtual.cluster import VirtualCluster
    with pytest.raises(CorralError, match=victim.replace("+", r"\+")):
        VirtualCluster(load(spec)).up()
    assert not (tmp_path / ".corral" / "bundle").exists() or not any((tmp_path / ".corral" / "bundle").iterdir())


class _Proxy(http.server.BaseHTTPRequestHandler):
    """A forward HTTP proxy for the tests: GET of an absolute URI on the allowed host only, each request
    line recorded (urllib's ProxyHandler({}): this process's own environment is not followed)."""
    allowed = ""
    seen: list[str] = []

    def do_GET(self):  # noqa: N802 - http.server's name
        self.seen.append(self.path)
        if urllib.parse.urlsplit(self.path).netloc != self.allowed:
            self.send_error(403, "not the repository")
            return
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        try:
            with opener.open(self.path, timeout=10) as r:
                body, status = r.read(), r.status
        except urllib.error.HTTPError as e:
            body, status = b"", e.code
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def site_proxy(air):
    host = network.host_address(TEST_SUBNET)
    _Proxy.allowed, _Proxy.seen = f"{host}:{TEST_PORT}", []
    server = http.server.ThreadingHTTPServer((host, TEST_PORT + 7), _Proxy)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://{host}:{TEST_PORT + 7}", _Proxy.seen
    finally:
        server.shutdown()
        server.server_close()


def test_a_site_proxy_carries_apt_and_users_downloads_and_goes_again(air, site_proxy):
    d, _, _ = air
    url, seen = site_proxy
    spec = d / "cluster.yaml"
    before = spec.read_text()
    from corral.virtual.cluster import VirtualCluster
    vc = VirtualCluster(load(spec))
    repo_url = f"http://{network.host_address(TEST_SUBNET)}:{TEST_PORT}"
    try:
        spec.write_text(before.replace("packages:\n", f"proxy: {{http: '{url}', no_proxy: [.example.com]}}\npackages:\n", 1))
        result = converge(load(spec), "apply", command="test-proxy")
        assert result.ok, failures(result)
        changed = {o.name for o in result.nodes["gpu01"].ops if o.status == "changed"}
        assert {"proxy | /etc/environment: the proxy for shells, jobs and downloads",
                "proxy | apt goes through the proxy"} <= changed
        ssh(vc, "gpu01", "apt-get update -q")
        assert f"{repo_url}/./InRelease" in seen, seen  # apt's own fetch (flat repository "./"), through the proxy
        env = ssh(vc, "login1", "env", check=True).stdout  # an SSH session: pam_env read /etc/environment
        assert f"http_proxy={url}" in env and "gpu01" in next(line for line in env.splitlines()
                                                              if line.startswith("no_proxy="))
        fetch = f"import urllib.request; print(urllib.request.urlopen('{repo_url}/Release').read().decode())"
        body = ssh(vc, "login1", f'python3 -c "{fetch}"').stdout  # a user's download (urllib reads http_proxy)
        assert "Origin: corral" in body and f"{repo_url}/Release" in seen
        again = converge(load(spec), "apply", command="test-proxy-noop")
        assert again.ok and again.changed == 0, [(n, o.name) for n, r in again.nodes.items() for o in r.ops
                                                 if o.status != "unchanged"]
    finally:
        spec.write_text(before)
    gone = converge(load(spec), "apply", command="test-proxy-gone")
    assert gone.ok, failures(gone)
    assert "proxy" not in ssh(vc, "gpu01", "cat /etc/environment; ls /etc/apt/apt.conf.d").stdout
    seen.clear()
    ssh(vc, "gpu01", "apt-get update -q")
    assert seen == []  # straight to the repository again


def test_served_by_the_control_host_for_the_run_apt_reads_it_alone(air):
    """packages.serve (what a real cluster sets): plan and apply serve the bundle from this host; apt on every
    node reads that source alone (the node's own sources.list, here the bridge repository, stays unread);
    the server is gone after the run; without packages.serve the node's own sources are back."""
    d, _, _ = air
    spec = d / "cluster.yaml"
    before = spec.read_text()
    from corral.virtual.cluster import VirtualCluster
    vc = VirtualCluster(load(spec))
    host = network.host_address(TEST_SUBNET)
    served = f"http://{host}:{TEST_PORT + 3}/"
    log = d / ".corral" / "logs" / "bundle-http.log"
    try:
        spec.write_text(before.rstrip("\n") + f"\n  serve: '{host}:{TEST_PORT + 3}'\n")
        result = converge(load(spec), "apply", command="test-serve")
        assert result.ok, failures(result)
        assert "apt lists refreshed (bundle source)" in {o.name.split(" | ")[1] for o in result.nodes["gpu01"].ops
                                                        if o.status == "changed"}
        assert '"GET /./InRelease HTTP/1.1" 200' in log.read_text()  # the nodes' apt-get update, from this run's server
        with pytest.raises(OSError):
            import socket
            socket.create_connection((host, TEST_PORT + 3), timeout=1).close()
        dump = ssh(vc, "gpu01", "apt-config dump | grep -E '^Dir::Etc::(sourcelist|sourceparts) '").stdout
        assert '"/etc/apt/corral-bundle.list"' in dump and '"/etc/apt/corral-bundle.list.d"' in dump
        assert ssh(vc, "gpu01", "cat /etc/apt/corral-bundle.list").stdout.splitlines()[-1] == (
            f"deb [signed-by=/etc/apt/keyrings/corral-bundle.gpg] {served} ./")
        again = converge(load(spec), "apply", command="test-serve-noop")
        assert again.ok and again.changed == 0, [(n, o.name) for n, r in again.nodes.items() for o in r.ops
                                                 if o.status != "unchanged"]
    finally:
        spec.write_text(before)
    back = converge(load(spec), "apply", command="test-serve-gone")
    assert back.ok, failures(back)
    assert ssh(vc, "gpu01", "ls /etc/apt/corral-bundle.list /etc/apt/apt.conf.d/00corral-bundle", check=False
               ).returncode != 0
    assert f":{TEST_PORT} ./ InRelease" in ssh(vc, "gpu01", "apt-get update -q 2>&1").stdout  # its own source again


def test_with_python_corral_installs_on_an_offline_control_host(air, tmp_path):
    """--with-python: corral's wheel and its dependencies' in the bundle; a fresh venv installs corral from
    them alone (pip --no-index) and runs it."""
    import subprocess
    import sys
    from corral.cli.bundle_cmd import python_pins
    d, _, _ = air
    pins, source = python_pins()
    assert source is not None and any(p.startswith("pyinfra==") for p in pins)
    with _files(d / "files"):
        built = build(load(d / "cluster.yaml"), tmp_path / "py.tar", image.release_status(image.ensure_image()),
                      repo.REPO / "pool", python=(pins, source))
    checked = verify(built.path, built.fingerprint)
    assert checked.ok, checked.problems
    wheels = {w["file"] for w in checked.manifest["python"]}
    assert any(w.startswith("python/corral-") for w in wheels) and len(wheels) == len(pins) + 1
    with tarfile.open(built.path) as tar:
        tar.extractall(tmp_path / "x", members=[m for m in tar.getmembers() if m.name.startswith("python/")],
                       filter="data")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    pip = subprocess.run([str(venv / "bin/pip"), "install", "-q", "--no-index", "--find-links",
                          str(tmp_path / "x" / "python"), "corral"], capture_output=True, text=True, timeout=600)
    assert pip.returncode == 0, pip.stderr[-2000:]
    out = subprocess.run([str(venv / "bin/corral"), "--version"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.strip(), out.stderr


def test_a_bundle_lacking_a_package_is_named_by_doctor_and_plan_before_anything_changes(air, tmp_path):
    """A bundle built for a smaller spec (no login node: no python3-venv) under the full one: doctor's
    bundle check and plan name the node and the package; nothing on the nodes changes."""
    d, built, _ = air
    small_dir = tmp_path / "small"
    small = make_spec(small_dir, name="air", compute=1, usable=False, os_name="debian-12")
    lacking = build(load(small), tmp_path / "small.tar", image.release_status(image.ensure_image()),
                    repo.REPO / "pool")
    spec = tmp_path / "cluster.yaml"
    spec.write_text((d / "cluster.yaml").read_text().replace(str(built.path), str(lacking.path))
                    + f"  fingerprint: {lacking.fingerprint}\n")
    (tmp_path / ".corral").symlink_to(d / ".corral")  # the same cluster: its keys and pinned host keys
    from corral.checks.doctor import doctor
    from corral.virtual.cluster import VirtualCluster
    vc = VirtualCluster(load(d / "cluster.yaml"))
    before = ssh(vc, "login1", "find /etc -newer /etc/hostname -type f 2>/dev/null | sort").stdout
    check = next(c for c in doctor(load(spec)).checks if c.name == "bundle")
    def needs(node: str) -> set[str]:
        text = check.nodes[node]
        assert text.startswith("FAIL: "), text
        return {part.removesuffix(": not in the bundle") for part in text.removeprefix("FAIL: ").split("; ")}
    common = {"needs lmod (software (Lmod))", f"needs {CUDA} (nvidia.cuda_toolkit)"}
    assert check.status == "FAIL" and needs("login1") == {"needs python3-venv (role login)", *common}, check.to_json()
    assert needs("gpu01") == {  # the small spec has no driver, no enroot (nor its download tools), no software
        "needs ca-certificates (nvidia.enroot/pyxis downloads)", "needs curl (nvidia.enroot/pyxis downloads)",
        "needs corral-test-nvidia-driver 1.0 (nvidia.driver.version)",
        "needs corral-test-enroot_1.0.0_amd64.deb (nvidia.enroot)", *common}, check.to_json()
    with pytest.raises(CorralError, match=r"the bundle lacks \d+ package\(s\) the spec needs: ctl needs curl "
                                          r"\(images.registry \(curl: its readiness\)\): not in the bundle"):
        converge(load(spec), "plan")  # ctl's registry first (the message names the first 8 gaps)
    assert ssh(vc, "login1", "find /etc -newer /etc/hostname -type f 2>/dev/null | sort").stdout == before
