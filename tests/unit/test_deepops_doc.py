"""docs/migrating-from-deepops.md holds the table of DeepOps variables exactly as the importer's table prints it
(`python -m corral.importers.deepops_doc`), so the page cannot drift from what the import does."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from corral.importers.deepops_doc import BEGIN, END, section
from corral.importers.deepops_vars import KNOWN, MAPPED

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "migrating-from-deepops.md"


def test_the_page_holds_the_generated_table():
    text = DOC.read_text()
    assert text.count(BEGIN) == 1 and text.count(END) == 1
    start = text.index(BEGIN)
    assert text[start:text.index(END) + len(END) + 1] == section(), \
        "regenerate: python -m corral.importers.deepops_doc, between the markers of docs/migrating-from-deepops.md"


def test_the_table_has_a_row_per_known_variable_with_its_key():
    rows = [line for line in section().splitlines() if line.startswith("| `")]
    assert len(rows) == len(KNOWN)
    assert "| `nfs_exports` | Slurm | `storage.exports` |" in section()
    assert "| `slurm_allow_ssh_user` | Slurm | `identity.adopt_exempt_users` |" in section()
    assert all(f"`{MAPPED[v].split(' ')[0]}`" in section() for v in MAPPED)


def test_the_generator_runs_as_a_module():
    out = subprocess.run([sys.executable, "-m", "corral.importers.deepops_doc"], capture_output=True, text=True,
                         check=True, env={"PYTHONPATH": str(ROOT / "src"), "PATH": "/usr/bin:/bin"}).stdout
    assert out == section()
