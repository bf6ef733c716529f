"""The backup file format (corral/backup/archive.py) and corral's state dir in it (local_state.py):
a backup is accepted only authentic and whole, for its own cluster; restoring the state dir never
overwrites. Forged backups and trust material: test_backup_auth.py."""

from __future__ import annotations

import io
import os
import sqlite3
import stat
import tarfile
from pathlib import Path

import pytest

from corral.backup import archive, auth, local_state, rotation
from corral.backup.restore import version_tuple
from corral.errors import CorralError

KEY = b"k" * 64


def _manifest(cluster: str = "demo") -> archive.Manifest:
    return archive.Manifest(cluster=cluster, created="2026-12-03T18:00:00+00:00", corral_version="0.1.0",
                            spec_hash="abc", slurm_version="22.05.8", controller="ctl", accounting="ctl")


@pytest.fixture
def backup(tmp_path: Path) -> Path:
    src = tmp_path / "src"
    src.mkdir()
    parts = {}
    for name, data in (("slurmctld-state.tar.gz", os.urandom(5000)), ("accounting.sql.gz", b"SQL" * 1000)):
        parts[name] = src / name
        parts[name].write_bytes(data)
    return archive.pack(tmp_path / f"demo-20261203T180000Z{archive.SUFFIX}", _manifest(), parts, KEY)


def test_round_trip_gives_back_every_part_byte_for_byte(backup: Path, tmp_path: Path) -> None:
    assert stat.S_IMODE(backup.stat().st_mode) == 0o600
    into = tmp_path / "out"
    into.mkdir()
    manifest, parts = archive.verify(backup, "demo", into, KEY)
    assert manifest.slurm_version == "22.05.8" and manifest.controller == "ctl"
    assert sorted(parts) == ["accounting.sql.gz", "slurmctld-state.tar.gz"]
    for name, path in parts.items():
        assert path.read_bytes() == (tmp_path / "src" / name).read_bytes()
    assert not list(tmp_path.glob(".*partial"))


def test_backup_of_another_cluster_is_refused_naming_both(backup: Path, tmp_path: Path) -> None:
    with pytest.raises(CorralError, match="of cluster 'demo', the spec is of 'other'"):
        archive.verify(backup, "other", tmp_path, KEY)


def _rewrite(src: Path, dest: Path, change) -> Path:
    """A copy of the backup `src` whose members pass through change(name, data) -> (name, data) | None;
    the manifest sealed again under KEY (what the key's holder could write)."""
    with tarfile.open(src) as tin, tarfile.open(dest, "w") as tout:
        manifest = b""
        for m in tin.getmembers():
            got = change(m.name, tin.extractfile(m).read())
            if got is None:
                continue
            if got[0] == archive.MANIFEST:
                manifest = got[1]
            elif got[0] == archive.SEAL:
                got = (got[0], auth.seal(manifest, KEY))
            info = tarfile.TarInfo(got[0])
            info.size = len(got[1])
            tout.addfile(info, io.BytesIO(got[1]))
    return dest


def test_a_flipped_byte_is_a_checksum_mismatch(backup: Path, tmp_path: Path) -> None:
    def flip(name, data):
        if name == "accounting.sql.gz":
            data = bytes([data[0] ^ 1]) + data[1:]
        return name, data
    bad = _rewrite(backup, tmp_path / "bad.tar", flip)
    into = tmp_path / "into"
    into.mkdir()
    with pytest.raises(CorralError, match="checksum mismatch in accounting.sql.gz"):
        archive.verify(bad, "demo", into, KEY)


@pytest.mark.parametrize("change, message", [
    (lambda n, d: None if n == "accounting.sql.gz" else (n, d), "missing: accounting.sql.gz"),
    (lambda n, d: ("../evil", d) if n == "accounting.sql.gz" else (n, d), "unexpected member '../evil'"),
    (lambda n, d: (n, b"{not json") if n == "manifest.json" else (n, d), "manifest is unreadable"),
    (lambda n, d: (n, d.replace(b'"format": 2', b'"format": 9')) if n == "manifest.json" else (n, d),
     "backup format 9"),
])
def test_damaged_backups_are_refused_with_what_is_wrong(backup: Path, tmp_path: Path, change, message) -> None:
    bad = _rewrite(backup, tmp_path / "bad.tar", change)
    into = tmp_path / "into"
    into.mkdir()
    with pytest.raises(CorralError, match=message) as exc:
        archive.verify(bad, "demo", into, KEY)
    assert "not a usable corral backup" in str(exc.value) and "was not changed" in str(exc.value)


def test_truncated_and_foreign_files_are_refused(backup: Path, tmp_path: Path) -> None:
    cut = tmp_path / "cut.tar"
    cut.write_bytes(backup.read_bytes()[:6000])
    for path in (cut, tmp_path / "junk.tar"):
        if path.name == "junk.tar":
            path.write_bytes(b"hello, not a tar\n" * 10)
        into = tmp_path / f"into-{path.stem}"
        into.mkdir()
        with pytest.raises(CorralError, match="not a usable corral backup"):
            archive.verify(path, "demo", into, KEY)
    with pytest.raises(CorralError, match="backup file not found"):
        archive.verify(tmp_path / "nope.tar", "demo", tmp_path, KEY)


def test_rotate_keeps_the_newest_of_this_cluster_only(tmp_path: Path) -> None:
    for stamp in ("20261201T000000Z", "20261202T000000Z", "20261203T000000Z"):
        (tmp_path / f"demo-{stamp}{archive.SUFFIX}").write_bytes(b"x")
    (tmp_path / f"other-20261101T000000Z{archive.SUFFIX}").write_bytes(b"x")
    removed = rotation.rotate(tmp_path, "demo", 2)
    assert [p.name for p in removed] == [f"demo-20261201T000000Z{archive.SUFFIX}"]
    assert len(rotation.backups_of(tmp_path, "demo")) == 2 and rotation.backups_of(tmp_path, "other")


def _state_dir(root: Path) -> Path:
    d = root / "state"
    (d / "secrets").mkdir(parents=True)
    (d / "secrets/munge.key").write_bytes(os.urandom(64))
    (d / "known_hosts").write_text("10.0.0.1 ssh-ed25519 AAAA\n")
    (d / "virtual.json").write_text("{}")
    (d / "logs").mkdir()
    (d / "logs/repo-http.log").write_text("GET /\n")
    (d / "backups").mkdir()
    (d / "backups/old.corral-backup.tar").write_bytes(b"x")
    with sqlite3.connect(d / "journal.sqlite") as db:
        db.execute("CREATE TABLE runs (id TEXT)")
        db.execute("INSERT INTO runs VALUES ('r1')")
    return d


def test_state_dir_keeps_secrets_keys_and_journal_not_runtime_files(tmp_path: Path) -> None:
    d = _state_dir(tmp_path)
    names = local_state.pack_state(d, tmp_path / "s.tar.gz")
    assert sorted(names) == ["journal.sqlite", "known_hosts", "secrets/munge.key"]
    fresh = tmp_path / "fresh"
    fresh.mkdir(mode=0o700)
    written, left_out = local_state.restore_missing(tmp_path / "s.tar.gz", fresh, trust=True)
    assert sorted(written) == sorted(names) and left_out == []
    assert (fresh / "secrets/munge.key").read_bytes() == (d / "secrets/munge.key").read_bytes()
    assert stat.S_IMODE((fresh / "secrets").stat().st_mode) == 0o700
    assert stat.S_IMODE((fresh / "secrets/munge.key").stat().st_mode) == 0o600
    with sqlite3.connect(fresh / "journal.sqlite") as db:
        assert db.execute("SELECT id FROM runs").fetchall() == [("r1",)]


def test_a_differing_state_file_is_kept_and_reported_never_overwritten(tmp_path: Path) -> None:
    d = _state_dir(tmp_path)
    local_state.pack_state(d, tmp_path / "s.tar.gz")
    (d / "secrets/munge.key").write_bytes(b"k" * 64)
    (d / "known_hosts").unlink()
    missing, differ, _ = local_state.compare_state(tmp_path / "s.tar.gz", d)
    assert (missing, differ) == (["known_hosts"], ["secrets/munge.key"])
    assert local_state.restore_missing(tmp_path / "s.tar.gz", d, trust=True) == (["known_hosts"], [])
    assert (d / "secrets/munge.key").read_bytes() == b"k" * 64


def test_slurm_versions_compare_by_major_and_minor() -> None:
    assert version_tuple("22.05.8") < version_tuple("23.02.1") and version_tuple("22.05.8") == version_tuple("22.05.11")
    assert version_tuple("23.11.4-1") > version_tuple("23.02.9")
