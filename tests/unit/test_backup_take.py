"""`corral backup` (corral/backup/take.py) over a fake node seam: the file is sealed with the state
dir's key (made once, reported), restore's check accepts it, and rotation keeps the new file."""

from __future__ import annotations

import datetime
import gzip
import subprocess
from pathlib import Path

from corral.backup import archive, auth, take
from corral.spec.loader import load

SPEC = """\
name: lab
nodes:
  - {names: ctl, addresses: [10.0.0.10], roles: [controller, accounting]}
  - {names: gpu01, addresses: [10.0.0.11], roles: [compute]}
backup: {keep: 1}
"""


def test_a_backup_is_sealed_with_the_state_dirs_key_and_rotation_keeps_it(tmp_path: Path, monkeypatch) -> None:
    (tmp_path / "cluster.yaml").write_text(SPEC)
    cluster = load(tmp_path / "cluster.yaml")
    monkeypatch.setattr(take, "run_on", lambda *a, **k: subprocess.CompletedProcess(a, 0, "slurmctld 22.05.8\n", ""))
    monkeypatch.setattr(take, "stream", lambda cluster, node, command, *, timeout, stdout=None, stdin=None:
                        Path(stdout).write_bytes(gzip.compress(command.encode())))
    shared = tmp_path / "shared"
    shared.mkdir()
    neighbour = shared / f"lab-prod-20990101T000000Z{archive.SUFFIX}"  # sorts after every lab file
    neighbour.write_bytes(b"x")
    t0 = datetime.datetime(2026, 12, 3, 3, 17, tzinfo=datetime.timezone.utc)
    first = take.take(cluster, shared, now=t0)
    assert first.ok and first.key_made == str(cluster.state_dir / auth.KEY_FILE), first.error
    second = take.take(cluster, shared, now=t0 + datetime.timedelta(days=1))
    assert second.ok and second.key_made is None and second.key_id == first.key_id
    assert second.removed == [first.file] and Path(second.file).exists() and neighbour.exists()
    into = tmp_path / "into"
    into.mkdir()
    manifest, parts = archive.verify(Path(second.file), "lab", into, auth.load_key(cluster.state_dir))
    assert manifest.slurm_version == "22.05.8" and set(parts) == set(archive.PARTS)
