"""The `backup:` section: where `corral backup` writes its files and how many it keeps
(src/corral/backup/ takes and restores them)."""

from __future__ import annotations

from pydantic import Field

from corral.spec.models_base import LOCAL_PATH, Strict


class BackupSpec(Strict):
    """Backups of the controller's state, the accounting database and corral's state dir."""

    dir: str | None = Field(default=None, pattern=LOCAL_PATH,
                            description="directory of the backup files on the control host (relative to the "
                                        "spec file); unset: <state_dir>/backups")
    keep: int = Field(default=7, ge=1, le=1000, description="backups of this cluster kept in `dir`; older "
                                                            "ones are removed after a new one is written")
