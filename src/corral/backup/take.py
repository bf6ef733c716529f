"""`corral backup`: one file holding slurmctld's StateSaveLocation (slurm.state_save_location), the accounting database
(mysqldump --single-transaction: a consistent snapshot while slurmdbd keeps writing) and corral's
state dir. Everything is streamed over SSH into a private temporary directory beside the backups;
nothing is staged on a node. The file appears whole (renamed into place) or not at all.
"""

from __future__ import annotations

import datetime
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from corral import __version__
from corral.backup import archive, auth, rotation
from corral.backup.local_state import pack_state
from corral.backup.state_dir import pack_command
from corral.deploy.accounting import DB
from corral.engine.remote import run_on, stream
from corral.errors import CorralError
from corral.spec.cluster import Cluster
from corral.spec.shared import state_save_location

STATE_PART, DB_PART, LOCAL_PART = archive.PARTS


@dataclass
class BackupResult:
    cluster: str
    ok: bool = False
    file: str | None = None
    bytes: int = 0
    parts: dict[str, int] = field(default_factory=dict)
    removed: list[str] = field(default_factory=list)
    key_id: str = ""                   # the key that authenticates it (backup/auth.py), not the key
    key_made: str | None = None        # the key file, when this backup made it: keep a copy off the host
    duration_s: float = 0.0
    error: str | None = None

    def to_json(self) -> dict:
        return {"cluster": self.cluster, "ok": self.ok, "file": self.file, "bytes": self.bytes,
                "parts": self.parts, "removed": self.removed, "key_id": self.key_id, "key_made": self.key_made,
                "duration_s": round(self.duration_s, 1),
                "error": self.error}


def backup_dir(cluster: Cluster, override: Path | None = None) -> Path:
    configured = cluster.spec.backup.dir
    if override is not None:
        return Path(override).expanduser().resolve()
    if configured:
        return (cluster.base_dir / Path(configured).expanduser()).resolve()
    return cluster.state_dir / "backups"


def primary_controller(cluster: Cluster) -> str:
    controllers = cluster.with_role("controller")
    if not controllers:
        raise CorralError("the spec has no node with the controller role: there is no Slurm state to back up",
                          fix="add the controller role to a node")
    return controllers[0].name


def slurm_version(cluster: Cluster, node: str) -> str:
    """`slurmctld -V` of `node`: "22.05.8"."""
    proc = run_on(cluster, node, "slurmctld -V", timeout=30, check=True)
    words = proc.stdout.split()
    return words[-1] if words else ""


def state_command(cluster: Cluster) -> str:
    """The controller's StateSaveLocation as tar.gz on stdout (backup/state_dir.py)."""
    return pack_command(state_save_location(cluster))


def dump_command() -> str:
    return f"mysqldump --single-transaction --quick --routines --triggers {DB} | gzip -c"


def take(cluster: Cluster, directory: Path | None = None, *, timeout: float = 600,
         now: datetime.datetime | None = None) -> BackupResult:
    result = BackupResult(cluster.name)
    start = time.monotonic()
    try:
        _take(cluster, backup_dir(cluster, directory), timeout, now or datetime.datetime.now(datetime.timezone.utc),
              result)
        result.ok = True
    except CorralError as exc:
        result.error = str(exc)
    finally:
        result.duration_s = time.monotonic() - start
    return result


def _take(cluster: Cluster, directory: Path, timeout: float, now: datetime.datetime, result: BackupResult) -> None:
    controller = primary_controller(cluster)
    acct = next((n.name for n in cluster.with_role("accounting")), "")
    try:
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as exc:
        raise CorralError(f"cannot create the backup directory: {exc.strerror}", where=str(directory),
                          fix="choose a writable directory with --to or backup.dir") from None
    dest = directory / rotation.backup_name(cluster.name, now)
    with tempfile.TemporaryDirectory(prefix=".backup-", dir=directory) as tmp:
        parts = {STATE_PART: Path(tmp) / STATE_PART}
        version = slurm_version(cluster, controller)
        stream(cluster, controller, state_command(cluster), stdout=parts[STATE_PART], timeout=timeout)
        if acct:
            parts[DB_PART] = Path(tmp) / DB_PART
            stream(cluster, acct, dump_command(), stdout=parts[DB_PART], timeout=timeout)
        parts[LOCAL_PART] = Path(tmp) / LOCAL_PART
        pack_state(cluster.state_dir, parts[LOCAL_PART])
        manifest = archive.Manifest(cluster=cluster.name, created=now.isoformat(timespec="seconds"),
                                    corral_version=__version__, spec_hash=cluster.spec_hash(),
                                    slurm_version=version, controller=controller, accounting=acct)
        key_path = cluster.state_dir / auth.KEY_FILE
        made = not key_path.exists()
        key = auth.ensure_key(cluster.state_dir)
        archive.pack(dest, manifest, parts, key)
        result.key_id, result.key_made = auth.key_id(key), str(key_path) if made else None
        result.parts = {name: info["bytes"] for name, info in manifest.parts.items()}
    result.file, result.bytes = str(dest), dest.stat().st_size
    result.removed = [str(p) for p in rotation.rotate(directory, cluster.name, cluster.spec.backup.keep, dest)]
