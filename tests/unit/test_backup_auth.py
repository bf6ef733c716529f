"""Backups are authenticated (corral/backup/auth.py) under a key kept outside every backup: a forged
file, its sums recomputed and the cluster name right, is refused before anything is read or changed."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import stat
import tarfile
from pathlib import Path

import pytest

from corral.backup import archive, auth, local_state
from corral.errors import CorralError

KEY = b"a" * 64
HOSTILE_SQL = b"\\! touch /tmp/pwned\nINSERT INTO acct_table VALUES ('x');\n"


def _manifest(cluster: str = "demo") -> archive.Manifest:
    return archive.Manifest(cluster=cluster, created="2026-12-03T18:00:00+00:00", corral_version="0.1.0",
                            spec_hash="abc", slurm_version="22.05.8", controller="ctl", accounting="ctl")


def _parts(directory: Path, sql: bytes = b"CREATE TABLE t (i INT);\n") -> dict[str, Path]:
    directory.mkdir(exist_ok=True)
    sql_part = directory / "accounting.sql.gz"
    sql_part.write_bytes(gzip.compress(sql))
    return {"accounting.sql.gz": sql_part}


@pytest.fixture
def genuine(tmp_path: Path) -> Path:
    return archive.pack(tmp_path / f"demo-20261203T180000Z{archive.SUFFIX}", _manifest(), _parts(tmp_path / "g"), KEY)


def _into(tmp_path: Path, name: str = "into") -> Path:
    d = tmp_path / name
    d.mkdir()
    return d


def _forge(genuine: Path, dest: Path, sql: bytes, seal: bytes | None) -> Path:
    """The genuine file with hostile SQL, the manifest's size and sha256 recomputed and the cluster
    name kept; sealed with `seal` (None: the genuine file's seal kept as it was)."""
    new = gzip.compress(sql)
    with tarfile.open(genuine) as tin:
        manifest = json.loads(tin.extractfile(archive.MANIFEST).read())
        old_seal = tin.extractfile(archive.SEAL).read()
    manifest["parts"]["accounting.sql.gz"] = {"bytes": len(new), "sha256": hashlib.sha256(new).hexdigest()}
    raw = json.dumps(manifest, indent=2).encode()
    members = [(archive.MANIFEST, raw), (archive.SEAL, old_seal if seal is None else seal), ("accounting.sql.gz", new)]
    with tarfile.open(dest, "w") as tout:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tout.addfile(info, io.BytesIO(data))
    return dest


def test_a_forged_backup_with_recomputed_sums_is_refused(genuine: Path, tmp_path: Path) -> None:
    """Before: the sums were the only check and the forger recomputes them; verify accepted this."""
    forged = _forge(genuine, tmp_path / "forged.tar", HOSTILE_SQL, seal=None)
    into = _into(tmp_path)
    with pytest.raises(CorralError, match="does not match its authentication") as exc:
        archive.verify(forged, "demo", into, KEY)
    assert "nothing was changed" in exc.value.fix and list(into.iterdir()) == []  # no part was even unpacked


def test_a_backup_sealed_with_another_key_names_both_key_ids(genuine: Path, tmp_path: Path) -> None:
    """Another state dir's key (or a forger's own) is refused, naming which key each side has."""
    other = b"b" * 64
    unsealed = _forge(genuine, tmp_path / "unsealed.tar", HOSTILE_SQL, seal=None)
    with tarfile.open(unsealed) as tin:
        raw = tin.extractfile(archive.MANIFEST).read()
    forged = _forge(genuine, tmp_path / "forged.tar", HOSTILE_SQL, seal=auth.seal(raw, other))
    with pytest.raises(CorralError, match=f"another key \\(key id {auth.key_id(other)}; the key given has id "
                                          f"{auth.key_id(KEY)}\\)"):
        archive.verify(forged, "demo", _into(tmp_path), KEY)
    assert archive.verify(forged, "demo", _into(tmp_path, "other"), other)  # that key's holder gets it


@pytest.mark.parametrize("seal, message", [
    (b"", "authentication member is unreadable"),
    (json.dumps({"alg": "sha256", "key_id": "x", "mac": "00"}).encode(), "authenticated with 'sha256'"),
    (json.dumps({"alg": "hmac-sha256", "key_id": auth.key_id(KEY), "mac": "00" * 32}).encode(),
     "does not match its authentication"),
])
def test_hostile_seals_are_refused(genuine: Path, tmp_path: Path, seal: bytes, message: str) -> None:
    forged = _forge(genuine, tmp_path / "forged.tar", HOSTILE_SQL, seal=seal)
    with pytest.raises(CorralError, match=message):
        archive.verify(forged, "demo", _into(tmp_path), KEY)


def test_an_unauthenticated_backup_format_1_is_refused(genuine: Path, tmp_path: Path) -> None:
    old = tmp_path / "old.tar"
    with tarfile.open(genuine) as tin, tarfile.open(old, "w") as tout:
        for m in tin.getmembers():
            if m.name != archive.SEAL:
                tout.addfile(m, tin.extractfile(m))
    with pytest.raises(CorralError, match="not authenticated .no manifest.hmac.*format 1"):
        archive.verify(old, "demo", _into(tmp_path), KEY)


def test_the_genuine_backup_passes_with_the_state_dirs_key_or_its_copy(tmp_path: Path) -> None:
    state = tmp_path / "state"
    key = auth.ensure_key(state)
    path = state / auth.KEY_FILE
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and len(key) == 64 and auth.ensure_key(state) == key
    backup = archive.pack(tmp_path / f"demo-20261203T180000Z{archive.SUFFIX}", _manifest(), _parts(tmp_path / "p"),
                          key)
    assert archive.verify(backup, "demo", _into(tmp_path, "a"), auth.load_key(state))[0].cluster == "demo"
    copy = tmp_path / "escrow.key"
    copy.write_bytes(path.read_bytes() + b"\n")  # as pasted back from a password manager
    rebuilt = tmp_path / "rebuilt"  # a new control host: an empty state dir
    assert archive.verify(backup, "demo", _into(tmp_path, "b"), auth.load_key(rebuilt, copy))[0].cluster == "demo"


def test_restore_never_makes_a_key_and_says_how_to_give_one(tmp_path: Path) -> None:
    rebuilt = tmp_path / "rebuilt"
    with pytest.raises(CorralError, match="no backup key") as exc:
        auth.load_key(rebuilt)
    assert "--key" in exc.value.fix and not (rebuilt / auth.KEY_FILE).exists()
    short = tmp_path / "short.key"
    short.write_text("abc\n")
    with pytest.raises(CorralError, match="3 characters, under 32: not a backup key"):
        auth.load_key(rebuilt, short)
    with pytest.raises(CorralError, match="cannot read the backup key"):
        auth.load_key(rebuilt, tmp_path / "nope.key")


def test_the_key_is_never_in_a_backup(tmp_path: Path) -> None:
    """The key authenticates the backups, so no backup may carry it (nor its bytes, anywhere)."""
    state = tmp_path / "state"
    key = auth.ensure_key(state)
    (state / "secrets/munge.key").write_bytes(os.urandom(64))
    names = local_state.pack_state(state, tmp_path / "s.tar.gz")
    assert names == ["secrets/munge.key"]
    assert key not in gzip.decompress((tmp_path / "s.tar.gz").read_bytes())
