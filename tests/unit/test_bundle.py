"""Bundles without apt: a small repository sealed with a real gpg key (bundle/build.py: seal), then
verified, tampered with, truncated, diffed, and refused by the spec rules and by serve.prepare. The
whole path (resolve against a clean node, fetch, `corral up --bundle`) is tests/vcluster/test_bundle.py."""

from __future__ import annotations

import io
import json
import shutil
import tarfile
from pathlib import Path

import pytest

from corral.bundle import build, diff, resolve, sign, verify
from corral.errors import CorralError
from corral.spec.loader import load

pytestmark = pytest.mark.skipif(shutil.which("gpg") is None or shutil.which("gpgv") is None,
                                reason="gpg and gpgv sign and check bundles (bootstrap installs them)")

INDEX = """Package: slurmd
Version: 22.05.8-4+deb12u3
Architecture: amd64
Depends: libnuma1 (>= 2.0.11), slurm-wlm-basic-plugins (= 22.05.8-4+deb12u3), munge | libmunge2
Filename: pool/slurmd_1_amd64.deb
Size: {size_a}
SHA256: {sha_a}

Package: libnuma1
Version: 2.0.16-1
Architecture: amd64
Provides: numa-lib
Filename: pool/libnuma1_1_amd64.deb
Size: {size_b}
SHA256: {sha_b}
"""


@pytest.fixture(scope="module")
def key(tmp_path_factory):
    state = tmp_path_factory.mktemp("state")
    home, fpr = sign.ensure_key(state, "test")
    return state, home, fpr


def make(tmp_path: Path, key, name: str = "b.tar", slurmd: bytes = b"slurmd deb") -> Path:
    _, home, fpr = key
    root = tmp_path / f"root-{name}"
    pool = root / "repo" / "pool"
    pool.mkdir(parents=True)
    (pool / "slurmd_1_amd64.deb").write_bytes(slurmd)
    (pool / "libnuma1_1_amd64.deb").write_bytes(b"libnuma deb")
    text = INDEX.format(size_a=len(slurmd), sha_a=build.sha256(pool / "slurmd_1_amd64.deb"),
                        size_b=11, sha_b=build.sha256(pool / "libnuma1_1_amd64.deb"))
    (root / "repo" / "Packages").write_text(text)
    (root / "repo" / "Packages.gz").write_bytes(b"")
    stanzas = resolve.paragraphs(text)
    why = resolve.reasons(stanzas, {"slurmd": ["role compute"]})
    content = {"format": 1, "cluster": "t", "distribution": "debian bookworm", "requested": {"slurmd": ["role compute"]},
               "packages": [{"package": s["Package"], "version": s["Version"], "architecture": "amd64",
                             "file": f"repo/{s['Filename']}", "sha256": s["SHA256"], "size": int(s["Size"]),
                             "why": why[s["Package"]]} for s in stanzas]}
    out = tmp_path / name
    build.seal(root, "t", content, home, fpr, out)
    return out


def rewrite(src: Path, dst: Path, change) -> None:
    """Copy a tar member by member; change(name, data) -> bytes | None (None: leave the member out)."""
    with tarfile.open(src) as tin, tarfile.open(dst, "w") as tout:
        for m in tin.getmembers():
            data = change(m.name, tin.extractfile(m).read())
            if data is not None:
                m.size = len(data)
                tout.addfile(m, io.BytesIO(data))


def test_a_sealed_bundle_verifies_against_its_key(tmp_path, key):
    state, home, fpr = key
    path = make(tmp_path, key)
    checked = verify.verify(path, fpr)
    assert checked.ok, checked.problems
    assert checked.fingerprint == fpr and checked.packages == 2
    names = tarfile.open(path).getnames()
    assert names == sorted(names) and {"SHA256SUMS", "SHA256SUMS.sig", "corral-bundle.gpg", "manifest.json",
                                       "repo/InRelease", "repo/Release"} <= set(names)
    assert all(m.mtime == 0 and m.uid == 0 for m in tarfile.open(path).getmembers())
    assert oct((state / sign.KEY_DIR).stat().st_mode & 0o777) == "0o700"
    assert b"PRIVATE KEY" not in path.read_bytes()  # only the public key travels


def test_the_manifest_says_why_each_package_is_there(tmp_path, key):
    m = verify.verify(make(tmp_path, key), key[2]).manifest
    why = {p["package"]: p["why"] for p in m["packages"]}
    assert why == {"slurmd": ["role compute"], "libnuma1": ["dependency of slurmd"]}


@pytest.mark.parametrize("target", ["repo/pool/slurmd_1_amd64.deb", "manifest.json", "repo/Packages"])
def test_an_altered_file_is_named(tmp_path, key, target):
    good = make(tmp_path, key)
    bad = tmp_path / "bad.tar"
    rewrite(good, bad, lambda name, data: data + b"x" if name == target else data)
    checked = verify.verify(bad, key[2])
    assert not checked.ok and checked.problems[0] == f"{target}: sha256 differs from SHA256SUMS (altered or truncated)"
    assert all(p.startswith(target) for p in checked.problems)  # the manifest is then not JSON either


def test_a_re_signed_bundle_by_another_key_is_refused(tmp_path, key, tmp_path_factory):
    other = tmp_path_factory.mktemp("other")
    home2, fpr2 = sign.ensure_key(other, "intruder")
    path = make(tmp_path, (other, home2, fpr2))
    checked = verify.verify(path, key[2])
    assert not checked.ok and f"signed by key {fpr2}, not the expected {key[2]}" in checked.problems[0]
    unpinned = verify.verify(path)  # no expectation: never "ok"; integrity checked against the carried key
    assert unpinned.problems == [verify.UNCHECKED] and unpinned.fingerprint == fpr2


def test_sums_edited_to_match_break_the_signature(tmp_path, key):
    good = make(tmp_path, key)
    bad = tmp_path / "bad.tar"
    digest = build.sha256  # recompute the altered .deb's sum, as a tamperer would

    def change(name, data):
        if name == "repo/pool/slurmd_1_amd64.deb":
            return b"evil"
        if name == "SHA256SUMS":
            import hashlib
            old = hashlib.sha256(b"slurmd deb").hexdigest()
            return data.replace(old.encode(), hashlib.sha256(b"evil").hexdigest().encode())
        return data
    assert digest
    rewrite(good, bad, change)
    problems = verify.verify(bad, key[2]).problems
    assert problems[0].startswith("SHA256SUMS: its signature does not check")
    assert any(p.startswith("manifest.json") or "manifest's sha256" in p for p in problems)


def test_missing_added_and_truncated(tmp_path, key):
    good = make(tmp_path, key)
    gone, added = tmp_path / "gone.tar", tmp_path / "added.tar"
    rewrite(good, gone, lambda name, data: None if name == "repo/pool/libnuma1_1_amd64.deb" else data)
    assert verify.verify(gone, key[2]).problems == ["repo/pool/libnuma1_1_amd64.deb: missing (listed in SHA256SUMS)"]
    shutil.copy(good, added)
    with tarfile.open(added, "a") as t:
        info = tarfile.TarInfo("repo/pool/extra.deb")
        info.size = 3
        t.addfile(info, io.BytesIO(b"abc"))
    assert verify.verify(added, key[2]).problems == ["repo/pool/extra.deb: not listed in SHA256SUMS (added after signing)"]
    cut = tmp_path / "cut.tar"
    cut.write_bytes(good.read_bytes()[:len(good.read_bytes()) // 2])
    problems = verify.verify(cut, key[2]).problems
    assert problems and not verify.verify(cut, key[2]).ok
    assert verify.verify(tmp_path / "nothing.tar").problems[0].startswith(f"{tmp_path / 'nothing.tar'}: not a readable")


def test_a_member_with_a_hostile_name_is_refused(tmp_path, key):
    good = make(tmp_path, key)
    bad = tmp_path / "bad.tar"
    shutil.copy(good, bad)
    with tarfile.open(bad, "a") as t:
        info = tarfile.TarInfo("../../etc/evil")
        info.size = 1
        t.addfile(info, io.BytesIO(b"x"))
        link = tarfile.TarInfo("repo/link")
        link.type, link.linkname = tarfile.SYMTYPE, "/etc/shadow"
        t.addfile(link)
    problems = verify.verify(bad, key[2]).problems
    assert "../../etc/evil: not a plain file with a relative name (refused)" in problems
    assert "repo/link: not a plain file with a relative name (refused)" in problems
    with pytest.raises(CorralError, match="refusing to use the bundle"):
        verify.unpack_verified(bad, verify.verify(bad, key[2]), tmp_path / "x")
    assert not (tmp_path / "x").exists()


def test_diff_names_added_removed_and_changed():
    a = {"requested": {"slurmd": []}, "packages": [
        {"package": "slurmd", "version": "1", "sha256": "a"}, {"package": "old", "version": "1", "sha256": "b"}]}
    b = {"requested": {"slurmd": [], "sssd": []}, "packages": [
        {"package": "slurmd", "version": "2", "sha256": "c", "why": ["role compute"]},
        {"package": "sssd", "version": "1", "sha256": "d", "why": ["identity.ldap"]}]}
    d = diff.diff(a, b)
    assert d["added"] == [{"package": "sssd", "version": "1", "why": ["identity.ldap"]}]
    assert d["removed"] == [{"package": "old", "version": "1"}]
    assert d["changed"] == [{"package": "slurmd", "from": "1", "to": "2", "why": ["role compute"]}]
    assert d["requested_added"] == ["sssd"] and not d["same"]
    assert diff.lines(d) == ["+ sssd 1  (identity.ldap)", "- old 1", "~ slurmd 1 -> 2"]
    assert diff.diff(a, a)["same"] and diff.lines(diff.diff(a, a)) == ["no change in packages or images"]


def test_dependency_reasons_follow_provides_and_alternatives():
    stanzas = resolve.paragraphs("Package: a\nDepends: v | c\n\nPackage: b\nProvides: v\n\nPackage: c\n\n"
                                 "Package: d\nPre-Depends: c:any (>= 1)\n\nPackage: lone\n")
    why = resolve.reasons(stanzas, {"a": ["every node"], "d": ["role login"]})
    assert why == {"a": ["every node"], "b": ["dependency of a"], "c": ["dependency of a, d"],
                   "d": ["role login"], "lone": ["dependency"]}


SPEC = """name: t
ssh: {user: root}
nodes:
  - {names: ctl, addresses: [10.0.0.10], roles: [controller]}
  - {names: gpu01, addresses: [10.0.0.11], roles: [compute], gpus: {model: h100, count: 4}}
"""


def test_spec_rules_for_a_bundle(tmp_path):
    f = tmp_path / "cluster.yaml"
    f.write_text(SPEC + "packages: {source: bundle}\n")
    with pytest.raises(CorralError, match="no bundle file is named"):
        load(f)
    f.write_text(SPEC + "packages: {bundle: b.tar}\n")
    from corral.spec.rules import spec_warnings
    assert spec_warnings(load(f)) == ["packages.bundle (b.tar) is not used: packages.source is mirror (set source: "
                                      "bundle to install from it alone)"]
    f.write_text(SPEC + "nvidia: {dcgm: {enabled: false}}\nmonitoring: {grafana: {enabled: false}}\n"
                 "packages: {source: bundle, serve: 10.0.0.1:8079, bundle: b.tar, fingerprint: " + "A" * 40 + "}\n")
    assert load(f).spec.packages.source == "bundle"
    f.write_text(SPEC + "monitoring: {grafana: {enabled: false}}\npackages: {source: bundle, bundle: b.tar}\n")
    with pytest.raises(CorralError, match="packages.serve"):  # DCGM is carried now (bundle/vendor.py); serve is not set
        load(f)
    f.write_text(SPEC + "nvidia: {driver: {version: 550.127.05, source: distribution}}\n"
                 "packages: {source: bundle, serve: 10.0.0.1:8079, bundle: b.tar}\n")
    with pytest.raises(CorralError, match=r"the NVIDIA driver from the distribution \(Ubuntu's packages\) would come "
                                          r"from outside the bundle, which does not carry it \(got 'distribution'\)"):
        load(f)
    f.write_text(SPEC + "nvidia: {dcgm: {enabled: false}}\nmonitoring: {grafana: {enabled: false}}\n"
                 "packages: {source: bundle, bundle: b.tar, fingerprint: xyz}\n")
    with pytest.raises(CorralError, match="fingerprint"):
        load(f)


def test_serve_prepare_refuses_what_it_cannot_trust(tmp_path, key):
    state, _, fpr = key
    good = make(tmp_path, key)
    spec = tmp_path / "cluster.yaml"
    base = SPEC + "nvidia: {dcgm: {enabled: false}}\nmonitoring: {grafana: {enabled: false}}\n"
    from corral.bundle.serve import prepare
    spec.write_text(base + f"packages: {{source: bundle, serve: 10.0.0.1:8079, bundle: {good.name}}}\n")
    with pytest.raises(CorralError, match="nothing to check the signer"):
        prepare(load(spec))  # this state dir made no key, and the spec pins none
    spec.write_text(base + f"packages: {{source: bundle, serve: 10.0.0.1:8079, bundle: {good.name}, fingerprint: {fpr}}}\n")
    repo, keyring = prepare(load(spec))
    assert (repo / "pool" / "slurmd_1_amd64.deb").read_bytes() == b"slurmd deb"
    assert sign.key_fingerprint(keyring) == fpr
    assert prepare(load(spec))[0] == repo  # unpacked once
    bad = tmp_path / "bad.tar"
    rewrite(good, bad, lambda name, data: data + b"x" if name == "repo/pool/slurmd_1_amd64.deb" else data)
    spec.write_text(base + f"packages: {{source: bundle, serve: 10.0.0.1:8079, bundle: bad.tar, fingerprint: {fpr}}}\n")
    with pytest.raises(CorralError, match="repo/pool/slurmd_1_amd64.deb: sha256 differs"):
        prepare(load(spec))
    assert [p.name for p in (tmp_path / ".corral" / "bundle").iterdir()] == [repo.parent.name]  # nothing else unpacked
    spec.write_text(base + f"packages: {{source: bundle, serve: 10.0.0.1:8079, bundle: gone.tar, fingerprint: {fpr}}}\n")
    with pytest.raises(CorralError, match="does not exist"):
        prepare(load(spec))
    assert json.loads((repo.parent / "manifest.json").read_text())["cluster"] == "t"


def _manifest(*pkgs: tuple[str, str]) -> dict:
    return {"packages": [{"package": p, "version": v, "sha256": "x"} for p, v in pkgs]}


EVERYTHING = [(p, "22.05.8-4+deb12u3") for p in ("chrony", "prometheus-node-exporter", "slurmctld", "slurm-client",
                                                   "munge", "python3-prometheus-client", "slurmd",
                                                   "libpam-slurm-adopt", "perftest")]


def test_coverage_names_each_node_and_package_the_bundle_lacks(tmp_path):
    from corral.bundle.coverage import gaps
    f = tmp_path / "cluster.yaml"
    f.write_text(SPEC)
    assert gaps(load(f), _manifest(*EVERYTHING)) == {  # DCGM comes from NVIDIA's repository (test_bundle_vendor.py)
        "gpu01": ["needs datacenter-gpu-manager-4-cuda12 (nvidia.dcgm): not in the bundle"]}
    base = SPEC + "nvidia: {dcgm: {enabled: false}}\n"
    f.write_text(base)
    cluster = load(f)
    assert gaps(cluster, _manifest(*EVERYTHING)) == {}
    lacking = [p for p in EVERYTHING if p[0] != "slurmd"]
    assert gaps(cluster, _manifest(*lacking)) == {"gpu01": ["needs slurmd (role compute): not in the bundle"]}
    f.write_text(base + "slurm: {version: '22.05.9'}\n")
    assert gaps(load(f), _manifest(*EVERYTHING)) == {
        node: [f"needs {p} 22.05.9 (slurm.version): the bundle has 22.05.8-4+deb12u3" for p in pkgs]
        for node, pkgs in {"ctl": ["slurm-client", "slurmctld"],
                           "gpu01": ["libpam-slurm-adopt", "slurm-client", "slurmd"]}.items()}
    f.write_text(base + "slurm: {version: '22.05'}\n")
    assert gaps(load(f), _manifest(*EVERYTHING)) == {}


def test_plan_refuses_a_bundle_lacking_a_package_before_touching_a_node(tmp_path, key):
    from corral.workflows.converge import converge
    _, _, fpr = key
    good = make(tmp_path, key)  # holds slurmd and libnuma1 only
    f = tmp_path / "cluster.yaml"
    f.write_text(SPEC + "nvidia: {dcgm: {enabled: false}}\nmonitoring: {grafana: {enabled: false}}\n"
                 f"packages: {{source: bundle, serve: 10.0.0.1:8079, bundle: {good.name}, fingerprint: {fpr}}}\n")
    with pytest.raises(CorralError, match=r"the bundle lacks \d+ package\(s\) the spec needs: ctl needs chrony "
                                          r"\(time sync\): not in the bundle"):
        converge(load(f), "plan")  # the nodes (10.0.0.x) are never contacted: it fails before


def test_a_real_cluster_names_where_the_bundle_is_served(tmp_path):
    f = tmp_path / "cluster.yaml"
    f.write_text(SPEC + "nvidia: {dcgm: {enabled: false}}\nmonitoring: {grafana: {enabled: false}}\n"
                 "packages: {source: bundle, bundle: b.tar}\n")
    with pytest.raises(CorralError, match="a bundle on a real cluster needs the address the nodes fetch it from.*set packages.serve"):
        load(f)


def test_apt_reads_the_bundle_alone_and_its_key_signs_it(tmp_path):
    from corral.render import bundle_source as bs
    f = tmp_path / "cluster.yaml"
    f.write_text(SPEC + "nvidia: {dcgm: {enabled: false}}\nmonitoring: {grafana: {enabled: false}}\n"
                 "packages: {source: bundle, serve: 10.0.0.1:8079, bundle: b.tar, fingerprint: " + "A" * 40 + "}\n")
    c = load(f)
    assert bs.url(c) == "http://10.0.0.1:8079/"
    assert bs.source_list(c).splitlines()[1] == ("deb [signed-by=/etc/apt/keyrings/corral-bundle.gpg] "
                                                 "http://10.0.0.1:8079/ ./")
    assert bs.only_source().splitlines()[-2:] == ['Dir::Etc::SourceList "/etc/apt/corral-bundle.list";',
                                                  'Dir::Etc::SourceParts "/etc/apt/corral-bundle.list.d";']
    f.write_text(SPEC)
    assert bs.url(load(f)) is None


def test_plan_and_apply_serve_the_bundle_for_the_run_only(tmp_path, key):
    import socket
    import urllib.request
    from corral.workflows.bundle_serve import serving
    _, _, fpr = key
    good = make(tmp_path, key)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    f = tmp_path / "cluster.yaml"
    f.write_text(SPEC + "nvidia: {dcgm: {enabled: false}}\nmonitoring: {grafana: {enabled: false}}\n"
                 f"packages: {{source: bundle, serve: '127.0.0.1:{port}', bundle: {good.name}, fingerprint: {fpr}}}\n")
    with serving(load(f)) as url:
        assert url == f"http://127.0.0.1:{port}/"
        body = urllib.request.urlopen(f"{url}InRelease", timeout=5).read()
        assert b"BEGIN PGP SIGNED MESSAGE" in body
    with pytest.raises(OSError):  # stopped with the run
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    f.write_text(SPEC + "nvidia: {dcgm: {enabled: false}}\nmonitoring: {grafana: {enabled: false}}\n"
                 f"packages: {{source: bundle, serve: '192.0.2.1:{port}', bundle: {good.name}, fingerprint: {fpr}}}\n")
    with pytest.raises(CorralError, match="cannot serve the bundle on 192.0.2.1"):
        with serving(load(f)):
            pass


def test_what_is_unpacked_is_what_was_checked(tmp_path, key):
    good = make(tmp_path, key)
    checked = verify.verify(good, key[2])
    assert verify.unpack_verified(good, checked, tmp_path / "ok").joinpath("repo/pool/slurmd_1_amd64.deb").is_file()
    checked.listed["repo/pool/slurmd_1_amd64.deb"] = "0" * 64  # as if the file changed after the check
    with pytest.raises(CorralError, match="changed while it was unpacked: repo/pool/slurmd_1_amd64.deb"):
        verify.unpack_verified(good, checked, tmp_path / "x")
    assert not (tmp_path / "x").exists()


def test_doctor_names_a_node_whose_release_the_bundle_was_not_resolved_for(tmp_path, key):
    from corral.checks.doctor import _bundle
    _, _, fpr = key
    good = make(tmp_path, key)
    f = tmp_path / "cluster.yaml"
    f.write_text(SPEC + "nvidia: {dcgm: {enabled: false}}\nmonitoring: {grafana: {enabled: false}}\n"
                 f"packages: {{source: bundle, serve: 10.0.0.1:8079, bundle: {good.name}, fingerprint: {fpr}}}\n")
    check = _bundle(load(f), {"gpu01": {"os": "ubuntu 22.04"}, "ctl": {"os": "debian 12"}})
    assert check.status == "FAIL"
    assert check.nodes["gpu01"] == ("FAIL: the bundle was resolved for debian bookworm; this node runs ubuntu "
                                    "22.04: its packages were not resolved for it")
    assert check.nodes["ctl"].startswith("FAIL: needs ")  # Debian 12 fits; the hand-made bundle holds slurmd and
    assert "resolved for" not in check.nodes["ctl"]      # libnuma1 only


def test_a_bundle_serves_one_debian_release(tmp_path):
    """Bundles are resolved against a clean node of one Debian release (12 or 13): a node group of a release
    bundles are not made for, or of a second release, is a located spec error with source: bundle, and `bundle
    build` of such a spec builds nothing; a Debian 13 spec needing a vendor repository is refused the same way."""
    from corral.bundle.build import build
    f = tmp_path / "cluster.yaml"
    tail = "nvidia: {dcgm: {enabled: false}}\nmonitoring: {grafana: {enabled: false}}\n"
    use = "packages: {source: bundle, serve: 10.0.0.1:8079, bundle: b.tar}\n"
    trixie = SPEC.replace("gpus: {model: h100, count: 4}}", "gpus: {model: h100, count: 4}, os: debian-13}").replace(
        "roles: [controller]}", "roles: [controller], os: debian-13}")
    assert trixie.count("os: debian-13") == 2
    f.write_text(trixie + tail + use)
    assert load(f).spec.packages.source == "bundle"  # Debian 13 throughout: one release, bundled
    mixed = SPEC.replace("gpus: {model: h100, count: 4}}", "gpus: {model: h100, count: 4}, os: debian-13}") + (
        "slurm: {version: '24.11'}\n")  # one Slurm on both releases (the site's own 24.11 for Debian 12)
    f.write_text(mixed + tail + use)
    with pytest.raises(CorralError) as e:
        load(f)
    line = next(i for i, text in enumerate(mixed.splitlines(), 1) if "names: gpu01," in text)
    assert f"cluster.yaml:{line}:" in str(e.value) and ("a bundle serves one release: the first node group runs "
                                                         "debian-12, these nodes debian-13") in str(e.value)
    ubuntu = SPEC.replace("roles: [controller]}", "roles: [controller], os: ubuntu-22.04}")
    f.write_text(ubuntu + tail + use)
    with pytest.raises(CorralError, match="bundles are resolved for debian-12 and debian-13 nodes only; these nodes "
                                          "run ubuntu-22.04"):
        load(f)
    # the CUDA toolkit from NVIDIA's CUDA repository (DCGM is not: NVIDIA publishes none for Debian 13)
    f.write_text(trixie + "monitoring: {grafana: {enabled: false}}\nnvidia: {cuda_toolkit: {version: '12.4'}}\n")
    with pytest.raises(CorralError, match=r"nvidia.driver.repo_url: NVIDIA CUDA repository \(cuda-toolkit-12-4"
                                          r".*\) is carried for debian-12 bundles only; nothing was built"):
        build(load(f), tmp_path / "out" / "b.tar", tmp_path / "status")
    f.write_text(mixed + tail)
    cluster = load(f)
    with pytest.raises(CorralError, match=r"nodes\[1\]\.os: debian-13: a bundle serves one release"):
        build(cluster, tmp_path / "out" / "b.tar", tmp_path / "status")
    assert not (tmp_path / "out").exists()  # nothing made: not even the signing key
    assert not cluster.state_dir.exists() or not any(cluster.state_dir.iterdir())


def test_corrals_slurm_26_05_set_is_never_bundled_for_real_nodes(tmp_path):
    """Debian 13 at slurm.version 26.05: corral's set (unstable's binaries, slurmd repacked) is for virtual
    clusters; a bundle for real nodes asking for it is refused naming slurm.version, before anything is fetched."""
    from corral.workflows.bundle_sources import sources
    f = tmp_path / "cluster.yaml"
    trixie = SPEC.replace("gpus: {model: h100, count: 4}}", "gpus: {model: h100, count: 4}, os: debian-13}").replace(
        "roles: [controller]}", "roles: [controller], os: debian-13}")
    f.write_text(trixie + "slurm: {version: '26.05'}\nnvidia: {dcgm: {enabled: false}}\n"
                 "monitoring: {grafana: {enabled: false}}\n")
    with pytest.raises(CorralError, match=r"slurm.version 26.05: corral's Slurm 26.05 for debian-13 is Debian "
                                          r"unstable's binaries with slurmd repacked .* nothing was built"):
        sources(load(f), tmp_path / "status")
    assert not (tmp_path / "status").exists()
