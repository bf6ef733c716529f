"""What restore may write into corral's state dir (corral/backup/local_state.py: kind): the records
when missing; trust material (secrets, known_hosts, SSH keys, the bundle signing key) only with
--restore-trust, each file listed; never the backup key, never anything else, whatever the backup
holds. And the SQL it loads goes to `mysql --sandbox` only."""

from __future__ import annotations

import datetime
import gzip
import io
import re
import subprocess
import tarfile
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from corral.backup import archive, auth, local_state, restore, rotation
from corral.spec.loader import load

SPEC = """\
name: lab
nodes:
  - {names: ctl, addresses: [10.0.0.10], roles: [controller, accounting]}
  - {names: "gpu[01-02]", addresses: "10.0.0.[11-12]", roles: [compute]}
"""
NOW = datetime.datetime(2026, 12, 3, 18, tzinfo=datetime.timezone.utc)
RECORDS = {"hw-facts.json", "deployed-nodes.json", "journal.sqlite"}
TRUST = {"known_hosts", "secrets/munge.key", "secrets/slurmdbd-db-password", "ssh/id_ed25519",
         "secrets/bundle-gpg/private-keys-v1.d/ABC.key"}
# names no restore may ever write: the backup key, runtime files, escapes, odd spellings
NEVER = ["secrets/backup.key", "virtual.json", "logs/x.log", "backups/x.corral-backup.tar", "../escape",
         "/tmp/abs", "secrets/../escape2", "./known_hosts", "ssh//id", "cluster.yaml", "secrets", "ssh"]


def _state_tar(dest: Path, names: list[str], links: bool = True) -> Path:
    with tarfile.open(dest, "w:gz") as tar:
        for name in names:
            data = f"from the backup: {name}\n".encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        if links:  # links are never files: skipped
            for kind in (tarfile.SYMTYPE, tarfile.LNKTYPE):
                info = tarfile.TarInfo("secrets/link" if kind == tarfile.SYMTYPE else "hw-facts.json")
                info.type, info.linkname = kind, "/etc/shadow"
                tar.addfile(info)
    return dest


def _files(root: Path) -> set[str]:
    return {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file() or p.is_symlink()}


@pytest.mark.parametrize("trust", [False, True])
def test_restore_missing_writes_only_the_allow_list(tmp_path: Path, trust: bool) -> None:
    """Before: every secret, known_hosts and SSH key in the backup was written back, unasked."""
    archive_path = _state_tar(tmp_path / "s.tar.gz", [*RECORDS, *TRUST, *NEVER])
    state = tmp_path / "box/state"
    state.mkdir(parents=True)
    written, left_out = local_state.restore_missing(archive_path, state, trust=trust)
    expected = RECORDS | (TRUST if trust else set())
    assert _files(tmp_path / "box") == {f"state/{n}" for n in expected}  # nothing beside the state dir either
    assert set(written) == expected and set(left_out) == (set() if trust else TRUST)


names = st.lists(st.sampled_from(["secrets", "ssh", "known_hosts", "backup.key", "..", ".", "", "/", "hw-facts.json",
                                  "logs", "journal.sqlite", "x", "deployed-nodes.json", "bundle-gpg"]),
                 min_size=1, max_size=4).map("/".join)


@settings(max_examples=200, deadline=None)
@given(members=st.lists(names, min_size=1, max_size=8), trust=st.booleans())
def test_hostile_member_names_never_escape_the_allow_list(tmp_path_factory, members, trust) -> None:
    tmp = tmp_path_factory.mktemp("fuzz")
    state = tmp / "box/state"
    state.mkdir(parents=True)
    archive_path = _state_tar(tmp / "s.tar.gz", members)
    try:
        local_state.restore_missing(archive_path, state, trust=trust)
    except Exception as exc:  # refused with a located error is fine; a crash or a stray write is not
        assert type(exc).__name__ == "CorralError", exc
    for name in _files(tmp / "box"):
        assert name.startswith("state/"), name
        kind = local_state.kind(name[len("state/"):])
        assert kind == "record" or (trust and kind == "trust"), name


class FakeNodes:
    """The node seam of restore.py: every command succeeds and is recorded, bytes fed in are kept."""

    def __init__(self) -> None:
        self.commands: list[str] = []
        self.fed: dict[str, bytes] = {}

    def run_on(self, cluster, node, command, **kw):
        self.commands.append(command)
        return subprocess.CompletedProcess(command, 0, "", "")

    def stream(self, cluster, node, command, *, timeout, stdout=None, stdin=None):
        self.commands.append(command)
        if stdin is not None:
            self.fed[command] = Path(stdin).read_bytes()


def _backup(tmp_path: Path, key: bytes, cluster: str = "lab") -> Path:
    parts_dir = tmp_path / "parts"
    parts_dir.mkdir()
    parts = {"slurmctld-state.tar.gz": parts_dir / "slurmctld-state.tar.gz",
             "accounting.sql.gz": parts_dir / "accounting.sql.gz",
             "corral-state.tar.gz": _state_tar(parts_dir / "corral-state.tar.gz", [*RECORDS, *TRUST, *NEVER])}
    parts["slurmctld-state.tar.gz"].write_bytes(gzip.compress(b"state"))
    parts["accounting.sql.gz"].write_bytes(gzip.compress(b"\\! touch /tmp/pwned\n"))
    manifest = archive.Manifest(cluster=cluster, created="2026-12-03T18:00:00+00:00", corral_version="0",
                                spec_hash="", slurm_version="22.05.8", controller="ctl", accounting="ctl")
    return archive.pack(tmp_path / rotation.backup_name(cluster, NOW), manifest, parts, key)


@pytest.fixture
def lab(tmp_path: Path, monkeypatch):
    (tmp_path / "cluster.yaml").write_text(SPEC)
    cluster = load(tmp_path / "cluster.yaml")
    nodes = FakeNodes()
    monkeypatch.setattr(restore, "run_on", nodes.run_on)
    monkeypatch.setattr(restore, "stream", nodes.stream)
    monkeypatch.setattr(restore, "slurm_version", lambda cluster, node: "22.05.8")
    return cluster, nodes


@pytest.mark.parametrize("trust", [False, True])
def test_a_whole_restore_writes_only_the_allow_list_and_lists_trust_files(lab, tmp_path: Path, trust: bool) -> None:
    cluster, nodes = lab
    key = auth.ensure_key(cluster.state_dir)
    backup = _backup(tmp_path, key)
    before = _files(cluster.state_dir)
    result = restore.restore(cluster, backup, run_validate=False, restore_trust=trust)
    assert result.ok, result.error
    expected = RECORDS | (TRUST if trust else set())
    assert _files(cluster.state_dir) - before == expected
    assert set(result.trust_restored) == (TRUST if trust else set())
    assert set(result.trust_not_restored) == (set() if trust else TRUST)
    # the SQL went to the sandboxed client only
    (load_cmd,) = [c for c, data in nodes.fed.items() if data == gzip.compress(b"\\! touch /tmp/pwned\n")]
    assert load_cmd == f"gunzip -c | {restore.LOAD_DB}" and "--sandbox" in restore.LOAD_DB
    assert restore.SANDBOX_CHECK in nodes.commands  # the node's client is checked for it before anything


def test_a_forged_backup_changes_nothing_at_all(lab, tmp_path: Path) -> None:
    cluster, nodes = lab
    auth.ensure_key(cluster.state_dir)
    forged = _backup(tmp_path, b"f" * 64)  # the forger's own key
    before = _files(cluster.state_dir)
    result = restore.restore(cluster, forged, run_validate=False, restore_trust=True)
    assert not result.ok and "another key" in result.error
    assert nodes.commands == [] and _files(cluster.state_dir) == before


def test_every_mysql_that_reads_sql_runs_sandboxed() -> None:
    """The class: any `mysql` in corral's source fed from a pipe or a file (a backup's SQL, a kept
    dump) must be the sandboxed client; `mysql -e '<corral's own statement>'` is not fed."""
    src = Path(restore.__file__).parents[1]
    unsandboxed = []
    for path in src.rglob("*.py"):
        for n, line in enumerate(path.read_text().splitlines(), 1):
            for m in re.finditer(r"(\s\|\s*|\s<\s*\S+\s+)(mysql|mariadb)\b(?![-.|])", line):
                if not line[m.end():].lstrip().startswith("--sandbox"):
                    unsandboxed.append(f"{path.relative_to(src)}:{n}: {line.strip()}")
    assert "--sandbox" in restore.LOAD_DB and not unsandboxed, unsandboxed


def test_the_cli_lists_each_trust_file_and_takes_the_key_copy(lab, tmp_path: Path, capsys) -> None:
    """A rebuilt control host: an empty state dir, the key's copy given with --key."""
    from corral.cli.main import main
    cluster, _ = lab
    copy = tmp_path / "escrow.key"
    copy.write_text("e" * 64 + "\n")
    backup = _backup(tmp_path, b"e" * 64)
    argv = ["restore", str(backup), "-f", str(cluster.path), "--yes", "--no-validate"]
    assert main(argv) == 1 and "--key" in capsys.readouterr().err  # no key here: stops, saying how
    assert main([*argv, "--key", str(copy)]) == 0
    out = capsys.readouterr().out
    for name in TRUST:
        assert f"state dir: {name} (trust material) not restored; --restore-trust writes it" in out
    assert main([*argv, "--key", str(copy), "--restore-trust"]) == 0
    out = capsys.readouterr().out
    assert sorted(line for line in out.splitlines() if "(trust material)" in line) == \
        sorted(f"state dir: restored {name} (trust material)" for name in TRUST)
    assert not (cluster.state_dir / auth.KEY_FILE).exists()  # the key is never written back
