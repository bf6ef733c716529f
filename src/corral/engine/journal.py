"""Every run journaled in SQLite (state dir `journal.sqlite`, dir 0700, file 0600).

Only what RunResult holds is written, and RunResult holds masked commands only: no secret reaches
the journal. One row per run; per-node results as JSON.
"""

from __future__ import annotations

import json
import os
import sqlite3
from contextlib import closing
from pathlib import Path

from corral.engine.results import RunResult
from corral.errors import CorralError

FILE = "journal.sqlite"
SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    id TEXT PRIMARY KEY,
    started TEXT NOT NULL,
    finished TEXT NOT NULL,
    command TEXT NOT NULL,
    mode TEXT NOT NULL,
    spec_hash TEXT NOT NULL,
    ok INTEGER NOT NULL,
    changed INTEGER NOT NULL,
    failed_nodes TEXT NOT NULL,
    nodes TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS runs_started ON runs (started);
"""


def journal_path(state_dir: Path) -> Path:
    return Path(state_dir) / FILE


def _connect(state_dir: Path) -> sqlite3.Connection:
    state_dir = Path(state_dir)
    path = journal_path(state_dir)
    try:
        state_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        if not path.exists():
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT, 0o600))
        os.chmod(path, 0o600)
        conn = sqlite3.connect(path, timeout=10)
        conn.executescript(SCHEMA)
        have = {row[1] for row in conn.execute("PRAGMA table_info(runs)")}
        for column in ("rollouts", "timing", "duration_s"):  # journals written before these columns
            if column not in have:
                kind = "REAL NOT NULL DEFAULT 0" if column == "duration_s" else "TEXT NOT NULL DEFAULT '[]'"
                conn.execute(f"ALTER TABLE runs ADD COLUMN {column} {kind}")
    except (OSError, sqlite3.Error) as exc:
        raise CorralError(f"cannot open the run journal: {exc}", value=str(path),
                          fix="check the state directory is writable by you") from exc
    return conn


def record(state_dir: Path, result: RunResult) -> None:
    data = result.to_json()
    with closing(_connect(state_dir)) as conn, conn:
        conn.execute(
            f"INSERT OR REPLACE INTO runs ({COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (result.run_id, result.started, result.finished, result.command, result.mode,
             result.spec_hash, int(result.ok), result.changed, json.dumps(result.failed_nodes),
             json.dumps(data["nodes"], sort_keys=True), json.dumps(data["rollouts"], sort_keys=True),
             json.dumps(data["timing"]), data["duration_s"]))


COLUMNS = ("id, started, finished, command, mode, spec_hash, ok, changed, failed_nodes, nodes, rollouts, timing, "
           "duration_s")


def _item(r: tuple, with_nodes: bool) -> dict:
    item = {"run_id": r[0], "started": r[1], "finished": r[2], "command": r[3], "mode": r[4],
            "spec_hash": r[5], "ok": bool(r[6]), "changed": r[7], "failed_nodes": json.loads(r[8]),
            "duration_s": r[12]}
    if with_nodes:
        item["nodes"], item["rollouts"], item["timing"] = json.loads(r[9]), json.loads(r[10]), json.loads(r[11])
    return item


def recent(state_dir: Path, limit: int = 20, *, with_nodes: bool = False) -> list[dict]:
    """The latest runs, newest first: run_id, started, finished, command, mode, spec_hash, ok,
    changed (op count), failed_nodes, and with_nodes the per-node results."""
    if not journal_path(state_dir).exists():
        return []
    with closing(_connect(state_dir)) as conn:
        rows = conn.execute(f"SELECT {COLUMNS} FROM runs ORDER BY started DESC, rowid DESC LIMIT ?",
                            (int(limit),)).fetchall()
    return [_item(r, with_nodes) for r in rows]


def get(state_dir: Path, run_id: str) -> dict | None:
    """One run with its per-node results, or None."""
    if not journal_path(state_dir).exists():
        return None
    with closing(_connect(state_dir)) as conn:
        row = conn.execute(f"SELECT {COLUMNS} FROM runs WHERE id = ?", (run_id,)).fetchone()
    return _item(row, True) if row else None
