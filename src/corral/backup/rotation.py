"""Backup files in their directory: the name `corral backup` gives a file and which files rotation
may remove (only this cluster's, matched by the whole name, never the file just written). The
directory may be shared by several clusters (backup.dir)."""

from __future__ import annotations

import datetime
import re
from pathlib import Path

from corral.backup.archive import SUFFIX

STAMP = "%Y%m%dT%H%M%SZ"                 # UTC; sorts as it reads
STAMP_RE = r"[0-9]{8}T[0-9]{6}Z"


def backup_name(cluster: str, now: datetime.datetime) -> str:
    """`<cluster>-<UTC time>.corral-backup.tar`: the only names rotation ever removes."""
    return f"{cluster}-{now.astimezone(datetime.timezone.utc).strftime(STAMP)}{SUFFIX}"


def backups_of(directory: Path, cluster: str) -> list[Path]:
    """The backups of `cluster` in `directory`, oldest first (names carry a sortable UTC time).
    The whole name is matched, not a glob: `lab-*` would also match cluster `lab-prod`'s files
    (cluster names are lowercase, so none can end in the stamp's `T...Z`)."""
    name = re.compile(re.escape(cluster) + "-" + STAMP_RE + re.escape(SUFFIX))
    return sorted(p for p in Path(directory).iterdir() if name.fullmatch(p.name) and p.is_file())


def rotate(directory: Path, cluster: str, keep: int, written: Path | None = None) -> list[Path]:
    """Remove all but the newest `keep` backups of `cluster`, never `written` (the file just made,
    even when a clock step makes it look older); returns what was removed."""
    old = backups_of(directory, cluster)[:-keep] if keep > 0 else []
    old = [p for p in old if written is None or p.resolve() != Path(written).resolve()]
    for p in old:
        p.unlink(missing_ok=True)
    return old
