"""`corral history`: the runs, one run node by node, --timing, --json; a journal written before
the timing columns still reads (migrated in place)."""

from __future__ import annotations

import json
import sqlite3

from corral.cli.main import main
from corral.engine import journal
from corral.engine.results import NodeResult, OpResult, RunResult
from corral.spec.loader import load

SPEC = """\
name: demo
state_dir: state
nodes:
  - {names: ctl, addresses: [10.0.0.10], roles: [controller]}
  - {names: gpu01, addresses: [10.0.0.11], roles: [compute]}
"""


def result(run_id: str, started: str) -> RunResult:
    r = RunResult(run_id=run_id, command="apply", mode="apply", spec_hash="abc", started=started,
                  finished=started, duration_s=12.0)
    r.nodes["ctl"] = NodeResult(node="ctl", address="10.0.0.10", ops=[
        OpResult(name="munge | packages", status="changed", commands=["apt-get install -y munge"], duration_s=9.0)])
    r.nodes["gpu01"] = NodeResult(node="gpu01", address="10.0.0.11", ops=[
        OpResult(name="munge | packages", status="unchanged", duration_s=1.0)])
    r.timing = [{"name": "connect", "kind": "connect", "s": 1.0}, {"name": "munge", "kind": "deploy", "s": 10.0}]
    return r


def test_history_run_timing_and_json(tmp_path, capsys):
    spec = tmp_path / "cluster.yaml"
    spec.write_text(SPEC)
    state = load(spec).state_dir
    journal.record(state, result("aaa111", "2026-12-01T10:00:00+00:00"))
    journal.record(state, result("bbb222", "2026-12-02T10:00:00+00:00"))
    assert main(["history", "-f", str(spec)]) == 0
    text = capsys.readouterr().out
    assert text.index("bbb222") < text.index("aaa111") and "12.0 s" in text
    assert main(["history", "-f", str(spec), "--run", "aaa111", "--timing"]) == 0
    text = capsys.readouterr().out
    assert "where 12.0 s went" in text and "install" in text and "munge | packages" in text
    assert main(["history", "-f", str(spec), "--timing", "--json"]) == 0  # the latest run
    data = json.loads(capsys.readouterr().out)
    assert data["run_id"] == "bbb222" and data["time"]["categories"]["install"] == 9.0
    assert data["time"]["phases"][1] == {"name": "munge", "kind": "deploy", "s": 10.0, "node": "ctl"}
    assert main(["history", "-f", str(spec), "--run", "nope"]) == 2
    assert "no run 'nope' in the journal" in capsys.readouterr().err


def test_a_journal_from_before_the_timing_columns(tmp_path):
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    db = sqlite3.connect(journal.journal_path(state))
    db.executescript("""CREATE TABLE runs (id TEXT PRIMARY KEY, started TEXT NOT NULL, finished TEXT NOT NULL,
        command TEXT NOT NULL, mode TEXT NOT NULL, spec_hash TEXT NOT NULL, ok INTEGER NOT NULL,
        changed INTEGER NOT NULL, failed_nodes TEXT NOT NULL, nodes TEXT NOT NULL);
        INSERT INTO runs VALUES ('old1', '2026-01-01T00:00:00+00:00', '2026-01-01T00:00:09+00:00', 'apply',
        'apply', 'h', 1, 0, '[]', '{}');""")
    db.commit()
    db.close()
    old = journal.get(state, "old1")
    assert old["timing"] == [] and old["rollouts"] == [] and old["duration_s"] == 0
    journal.record(state, result("new1", "2026-12-02T10:00:00+00:00"))
    assert [r["run_id"] for r in journal.recent(state)] == ["new1", "old1"]
    assert journal.get(state, "new1")["timing"][1]["name"] == "munge"
