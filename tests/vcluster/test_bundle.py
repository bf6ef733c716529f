"""Air-gapped install, end to end: `corral bundle build` on the control host (it has the registries), then
`corral up --bundle` builds the virtual cluster from the bundle alone: corral's on-the-fly repository is
neither filled nor served, apt on the nodes takes only the bundle's signed repository, validate passes,
and a second apply changes nothing. A bundle with one .deb altered is named by verify and refused by up."""

from __future__ import annotations

import io
import tarfile
import urllib.error
import urllib.request

import pytest

from corral.bundle.build import build
from corral.bundle.verify import verify
from corral.errors import CorralError
from corral.spec.loader import load
from corral.virtual import image, network, repo
from corral.workflows.converge import converge
from corral.workflows.up import bundle_section, up
from tests.vcluster.conftest import TEST_PORT, TEST_SUBNET, failures, make_spec, ssh, vcluster_unavailable

pytestmark = pytest.mark.vcluster


@pytest.fixture(scope="module")
def air(tmp_path_factory):
    reason = vcluster_unavailable()
    if reason:
        pytest.skip(reason)
    d = tmp_path_factory.mktemp("air")
    spec = make_spec(d, name="air", compute=1, usable=True)
    built = build(load(spec), d / "air.tar", image.ensure_image() / "var/lib/dpkg/status", repo.REPO / "pool")
    spec.write_text(spec.read_text() + bundle_section(built.path, None))  # signer: this state dir's own key
    patch = pytest.MonkeyPatch()
    patch.setattr(repo, "ensure_repo", lambda *a, **k: pytest.fail("the on-the-fly repository was filled"))
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
        assert sources.strip() == f"deb [signed-by=/etc/apt/keyrings/corral-bundle.gpg] {url}/ ./", sources
    # apt checks the signature: the InRelease the nodes fetched verifies with the bundle's key
    policy = ssh(vc, "gpu01", "apt-get update 2>&1; apt-cache policy slurmd").stdout
    assert "NO_PUBKEY" not in policy and "not signed" not in policy and "Candidate:" in policy


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
