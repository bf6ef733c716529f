"""An older signed bundle does not downgrade the nodes: each bundle carries a serial (its build time) and a
valid_until in its signed manifest, InRelease carries Date and Valid-Until (apt refuses a replayed one once
expired); the newest serial a state dir has used is remembered and an older bundle refused, unless
accepted on purpose (`corral bundle use --allow-downgrade`); an expired bundle does not verify."""

from __future__ import annotations

import json
import shutil
from email.utils import parsedate_to_datetime

import pytest
from typer.testing import CliRunner

from corral.bundle import build, serial, verify
from corral.bundle.serve import prepare
from corral.cli.main import app
from corral.errors import CorralError
from corral.spec.loader import load
from tests.unit.test_bundle import SPEC, key, make  # noqa: F401  (key: the builder's fixture)

pytestmark = pytest.mark.skipif(shutil.which("gpg") is None or shutil.which("gpgv") is None,
                                reason="gpg and gpgv sign and check bundles (bootstrap installs them)")

BASE = SPEC + "nvidia: {dcgm: {enabled: false}}\nmonitoring: {grafana: {enabled: false}}\n"


def built_at(tmp_path, key, when: int, name: str, monkeypatch):
    monkeypatch.setattr(build.time, "time", lambda: float(when))
    try:
        return make(tmp_path, key, name=name)
    finally:
        monkeypatch.undo()


def spec_for(tmp_path, bundle, fpr):
    f = tmp_path / "cluster.yaml"
    f.write_text(BASE + f"packages: {{source: bundle, serve: 10.0.0.1:8079, bundle: {bundle.name}, fingerprint: {fpr}}}\n")
    return f


def test_the_signed_manifest_and_inrelease_carry_serial_and_validity(tmp_path, key):
    path = make(tmp_path, key)
    checked = verify.verify(path, key[2])
    m = checked.manifest
    assert checked.ok and m["format"] == 2 and m["valid_until"] - m["serial"] == build.VALID_DAYS * 86400
    import tarfile
    release = tarfile.open(path).extractfile("repo/InRelease").read().decode()
    fields = dict(line.split(": ", 1) for line in release.splitlines() if line.startswith(("Date: ", "Valid-Until: ")))
    assert int(parsedate_to_datetime(fields["Date"]).timestamp()) == m["serial"]
    assert int(parsedate_to_datetime(fields["Valid-Until"]).timestamp()) == m["valid_until"]


def test_an_expired_bundle_does_not_verify(tmp_path, key, monkeypatch):
    old = built_at(tmp_path, key, 1_000_000_000, "old.tar", monkeypatch)  # 2001: long expired
    problems = verify.verify(old, key[2]).problems
    assert problems == ["manifest.json: the bundle expired on Sat, 08 Dec 2001 01:46:40 GMT (apt on the nodes "
                        "refuses its InRelease after that): build a new one"]


def test_an_older_bundle_is_refused_unless_accepted_on_purpose(tmp_path, key, monkeypatch):
    import time
    now = int(time.time())
    _, _, fpr = key
    older = built_at(tmp_path, key, now - 3600, "older.tar", monkeypatch)
    newer = built_at(tmp_path, key, now, "newer.tar", monkeypatch)
    state = tmp_path / ".corral"
    prepare(load(spec_for(tmp_path, newer, fpr)))
    assert serial.remembered(state) == now
    with pytest.raises(CorralError, match=r"older than one this state dir has used already .* would downgrade the "
                                          r"nodes.*--allow-downgrade"):
        prepare(load(spec_for(tmp_path, older, fpr)))
    assert serial.remembered(state) == now and [p.name for p in (state / "bundle").iterdir()] != []
    spec = spec_for(tmp_path, older, fpr)
    refused = CliRunner().invoke(app, ["bundle", "use", str(older), "-f", str(spec)])
    assert refused.exit_code == 1 and serial.remembered(state) == now
    accepted = CliRunner().invoke(app, ["bundle", "use", str(older), "-f", str(spec), "--allow-downgrade", "--json"])
    assert accepted.exit_code == 0, accepted.output
    assert json.loads(accepted.output) == {"ok": True, "path": str(older), "serial": now - 3600,
                                           "previous_serial": now}
    repo, _ = prepare(load(spec))  # now the older one is the one in use
    assert serial.remembered(state) == now - 3600 and repo.is_dir()
    prepare(load(spec_for(tmp_path, newer, fpr)))  # and a newer one raises the floor again
    assert serial.remembered(state) == now


def test_a_damaged_serial_record_refuses_rather_than_forgets(tmp_path, key):
    state = tmp_path / ".corral"
    state.mkdir()
    (state / serial.STATE).write_text("{not json")
    path = make(tmp_path, key)
    with pytest.raises(CorralError, match="bundle-serial.json cannot be read"):
        prepare(load(spec_for(tmp_path, path, key[2])))
