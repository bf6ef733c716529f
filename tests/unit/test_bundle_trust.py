"""Whose signature a bundle carries is decided by the pinned key alone, never by key material that
arrives with the bundle: an attacker who appends their key to the bundle's keyring, alters a .deb and
signs SHA256SUMS and InRelease with their own key is refused (real gpg, throwaway homes); the nodes get
the pinned key alone as apt's signed-by keyring; without a key to compare, verify does not pass."""

from __future__ import annotations

import ast
import hashlib
import json
import re
import shutil
from pathlib import Path

import pytest

from corral.bundle import build, sign, verify
from corral.errors import CorralError
from corral.spec.loader import load
from tests.unit.test_bundle import SPEC, key, make, rewrite  # noqa: F401  (key: the builder's fixture)

pytestmark = pytest.mark.skipif(shutil.which("gpg") is None or shutil.which("gpgv") is None,
                                reason="gpg and gpgv sign and check bundles (bootstrap installs them)")

DEB = "repo/pool/slurmd_1_amd64.deb"


@pytest.fixture(scope="module")
def attacker(tmp_path_factory):
    home, fpr = sign.ensure_key(tmp_path_factory.mktemp("attacker"), "attacker")
    return home, fpr


def forge(good, out, builder_fpr, attacker):
    """The builder's bundle with its keyring = [builder's key, attacker's key], a .deb altered, the manifest
    and SHA256SUMS rewritten to match, SHA256SUMS.sig and repo/InRelease signed by the attacker."""
    home, fpr = attacker
    evil = b"evil deb"
    files: dict[str, bytes] = {}
    rewrite(good, out.with_suffix(".copy"), lambda name, data: files.setdefault(name, data))
    builder_key = files[build.KEY_FILE]
    files[build.KEY_FILE] = builder_key + sign.export_public(home, fpr)
    old = hashlib.sha256(files[DEB]).hexdigest()
    files[DEB] = evil
    manifest = json.loads(files[build.MANIFEST])
    for p in manifest["packages"]:
        if p["file"] == DEB:
            p["sha256"], p["size"] = hashlib.sha256(evil).hexdigest(), len(evil)
    files[build.MANIFEST] = (json.dumps(manifest, indent=1, sort_keys=True) + "\n").encode()
    files["repo/InRelease"] = sign.sign(home, fpr, files["repo/Release"], clear=True)
    sums = "".join(f"{hashlib.sha256(data).hexdigest()}  {name}\n" for name, data in sorted(files.items())
                   if name not in (build.SUMS, f"{build.SUMS}.sig"))
    assert old not in sums
    files[build.SUMS] = sums.encode()
    files[f"{build.SUMS}.sig"] = sign.sign(home, fpr, files[build.SUMS], clear=False)
    rewrite(good, out, lambda name, data: files[name])
    return out


def test_an_attacker_key_appended_to_the_carried_keyring_is_refused(tmp_path, key, attacker):
    _, _, fpr = key
    bad = forge(make(tmp_path, key), tmp_path / "forged.tar", fpr, attacker)
    checked = verify.verify(bad, fpr)
    assert not checked.ok
    assert any(p.startswith("SHA256SUMS: its signature does not check") for p in checked.problems), checked.problems
    assert any(p.startswith(f"{build.KEY_FILE}: holds 2 keys") for p in checked.problems), checked.problems
    assert any(p.startswith("repo/InRelease: its signature does not check") for p in checked.problems)


@pytest.mark.attack
def test_the_forged_bundle_is_refused_by_prepare_and_the_cli(tmp_path, key, attacker):
    from typer.testing import CliRunner
    from corral.bundle.serve import prepare
    from corral.cli.main import app
    _, _, fpr = key
    bad = forge(make(tmp_path, key), tmp_path / "forged.tar", fpr, attacker)
    spec = tmp_path / "cluster.yaml"
    spec.write_text(SPEC + "nvidia: {dcgm: {enabled: false}}\nmonitoring: {grafana: {enabled: false}}\n"
                    f"packages: {{source: bundle, serve: 10.0.0.1:8079, bundle: {bad.name}, fingerprint: {fpr}}}\n")
    with pytest.raises(CorralError, match="refusing the bundle"):
        prepare(load(spec))
    assert not (tmp_path / ".corral" / "bundle").exists() or not any((tmp_path / ".corral" / "bundle").iterdir())
    result = CliRunner().invoke(app, ["bundle", "verify", str(bad), "--fingerprint", fpr])
    assert result.exit_code == 1 and "(the expected one)" not in result.output


def test_the_nodes_get_the_pinned_key_alone(tmp_path, key, attacker):
    """A bundle whose carried keyring also holds another key still verifies when the builder signed it (the
    extra key is named as a problem though), and what the nodes would trust is the pinned key alone."""
    from corral.bundle.trust import pinned_keyring
    _, home, fpr = key
    good = make(tmp_path, key)
    carried = sign.export_public(home, fpr) + sign.export_public(*attacker)
    assert sign.primary_fingerprints(carried) == [fpr, attacker[1]]
    assert sign.primary_fingerprints(pinned_keyring(fpr, carried)) == [fpr]
    assert sign.primary_fingerprints(pinned_keyring(fpr, carried, home)) == [fpr]
    with pytest.raises(CorralError, match=f"does not hold the key {attacker[1][:8]}"):
        pinned_keyring(attacker[1], sign.export_public(home, fpr))
    checked = verify.verify(good, fpr)
    assert checked.ok and sign.primary_fingerprints(checked.keyring) == [fpr]


def test_without_a_key_to_compare_verify_does_not_pass(tmp_path, key):
    from typer.testing import CliRunner
    from corral.cli.main import app
    good = make(tmp_path, key)
    checked = verify.verify(good)
    assert not checked.ok and checked.problems[0].startswith("authenticity not checked")
    result = CliRunner().invoke(app, ["bundle", "verify", str(good)])
    assert result.exit_code == 1 and "authenticity not checked" in result.output
    ok = CliRunner().invoke(app, ["bundle", "verify", str(good), "--fingerprint", key[2]])
    assert ok.exit_code == 0 and "(the expected one)" in ok.output, ok.output


def test_a_good_signature_by_another_key_of_the_keyring_is_not_the_pinned_ones(key, attacker):
    """sign.verify checks gpgv's VALIDSIG primary fingerprint: a keyring holding both keys and a good
    signature by the other one is refused."""
    _, home, fpr = key
    both = sign.export_public(home, fpr) + sign.export_public(*attacker)
    data = b"hello\n"
    by_attacker = sign.sign(*attacker, data, clear=False)
    assert sign.verify(both, data, by_attacker, fingerprint=attacker[1]) is None
    said = sign.verify(both, data, by_attacker, fingerprint=fpr)
    assert said is not None and attacker[1] in said
    assert sign.verify(both, data, sign.sign(home, fpr, data, clear=False), fingerprint=fpr) is None
    clear = sign.sign(home, fpr, data, clear=True)
    assert sign.verify(both, None, clear, fingerprint=fpr) is None
    assert sign.verify(both, None, sign.sign(*attacker, data, clear=True), fingerprint=fpr) is not None


def test_the_nodes_keyring_from_a_spec_is_the_pinned_key_alone(tmp_path, key, attacker):
    """deploy/package_source.bundle_key (what apt's signed-by= file on every node holds) for a bundle whose
    carried keyring also holds the attacker's key: the pinned key alone, with or without this state dir's."""
    from corral.deploy.package_source import bundle_key
    _, _, fpr = key
    bad = forge(make(tmp_path, key), tmp_path / "forged.tar", fpr, attacker)
    spec = tmp_path / "cluster.yaml"
    spec.write_text(SPEC + "nvidia: {dcgm: {enabled: false}}\nmonitoring: {grafana: {enabled: false}}\n"
                    f"packages: {{source: bundle, serve: 10.0.0.1:8079, bundle: {bad.name}, fingerprint: {fpr}}}\n")
    assert sign.primary_fingerprints(bundle_key(load(spec))) == [fpr]
    spec.write_text(spec.read_text().replace(f", fingerprint: {fpr}", ""))
    with pytest.raises(CorralError, match="no pinned key for the bundle"):
        bundle_key(load(spec))  # nothing pinned, and this state dir has no key: no keyring is made up


def _string_constants(tree):
    docstrings = {id(n.body[0].value) for n in ast.walk(tree) if isinstance(
        n, (ast.Module, ast.FunctionDef, ast.ClassDef)) and n.body and isinstance(n.body[0], ast.Expr)}
    return [n for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)
            and id(n) not in docstrings]


def test_every_signature_check_compares_the_signer_with_a_pinned_key():
    """The class: gpgv (or gpg --verify) is run in bundle/sign.py alone, whose verify() takes the pinned
    fingerprint as a required keyword and compares gpgv's VALIDSIG with it; every call passes one."""
    import inspect
    src = Path(__file__).resolve().parents[2] / "src" / "corral"
    param = inspect.signature(sign.verify).parameters["fingerprint"]
    assert param.kind is inspect.Parameter.KEYWORD_ONLY and param.default is inspect.Parameter.empty
    assert "VALIDSIG" in inspect.getsource(sign.validsig_primaries)
    runners, calls = [], []
    for path in sorted(src.rglob("*.py")):
        tree = ast.parse(path.read_text())
        rel = path.relative_to(src).as_posix()
        for c in _string_constants(tree):
            if rel != "bundle/sign.py" and re.search(r"(^|[\s/])gpgv($|\s)|--verify\b", c.value):
                runners.append(f"{rel}:{c.lineno}: {c.value[:60]!r}")
        for node in ast.walk(tree):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "verify"
                    and isinstance(node.func.value, ast.Name) and node.func.value.id == "sign"):
                kw = {k.arg: k.value for k in node.keywords}
                if "fingerprint" not in kw or (isinstance(kw["fingerprint"], ast.Constant)
                                               and kw["fingerprint"].value is None):
                    calls.append(f"{rel}:{node.lineno}")
    assert not runners, "signatures are checked through corral.bundle.sign.verify alone:\n" + "\n".join(runners)
    assert not calls, "sign.verify without a pinned fingerprint:\n" + "\n".join(calls)


def test_a_duplicate_member_is_refused(tmp_path, key):
    """A second member of the same name (here an altered .deb before the signed one): tarfile and tar take
    the last, another reader could take the first; either way the bundle is refused, naming it."""
    import io
    import tarfile
    good = make(tmp_path, key)
    bad = tmp_path / "dup.tar"
    with tarfile.open(good) as tin, tarfile.open(bad, "w") as tout:
        evil = tarfile.TarInfo(DEB)
        evil.size = 4
        tout.addfile(evil, io.BytesIO(b"evil"))
        for m in tin.getmembers():
            tout.addfile(m, tin.extractfile(m))
    checked = verify.verify(bad, key[2])
    assert checked.problems == [f"{DEB}: appears 2 times in the archive (refused)"]
