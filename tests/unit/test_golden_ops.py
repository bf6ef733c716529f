"""The golden ops (tests/unit/golden_ops.py): for each golden spec, every node's prepared and planned ops
(names, commands, uploads by their content's sha256) equal tests/golden/ops/<spec>/<node>.txt byte for byte,
and no file there belongs to a node the spec no longer has. The safety net for porting the components to
data (issue 48): a port leaves every file as it was.

After an intended change, regenerate, read the diff, commit it with the change:

    CORRAL_GOLDEN_UPDATE=1 .venv/bin/python -m pytest tests/unit/test_golden_ops.py

(rewrites each spec's node files and removes those of nodes gone; the tests then pass; CORRAL_UPDATE_GOLDEN=1,
which rewrites the render goldens, does it too). A mismatch is
shown as a unified diff (the first MAX_DIFF_LINES lines); one that comes from the preparation itself
differing between two directories (a new random or dated value) is said to be that instead.
"""

from __future__ import annotations

import difflib
import os

import pytest

from tests.unit.golden_ops import GOLDEN, SPECS, golden_texts

UPDATE = "1" in (os.environ.get("CORRAL_GOLDEN_UPDATE"), os.environ.get("CORRAL_UPDATE_GOLDEN"))  # the latter: render's
MAX_DIFF_LINES = 120


def _diffs(want: dict[str, str], got: dict[str, str], what: str) -> str:
    """The unified diffs of the nodes whose texts differ, truncated."""
    lines: list[str] = []
    for node in sorted(set(want) | set(got)):
        if want.get(node) != got.get(node):
            lines += difflib.unified_diff((want.get(node) or "").splitlines(keepends=True),
                                          (got.get(node) or "").splitlines(keepends=True),
                                          fromfile=f"{node}.txt ({what[0]})", tofile=f"{node}.txt ({what[1]})", n=2)
    more = len(lines) - MAX_DIFF_LINES
    return "".join(lines[:MAX_DIFF_LINES]) + (f"... ({more} more diff lines)\n" if more > 0 else "")


@pytest.mark.parametrize("spec", sorted(SPECS))
def test_prepared_ops_equal_the_golden_files(spec, tmp_path, monkeypatch):
    texts = golden_texts(spec, tmp_path / "one", monkeypatch)
    where = GOLDEN / spec
    if UPDATE:
        where.mkdir(parents=True, exist_ok=True)
        for old in where.glob("*.txt"):
            if old.stem not in texts:
                old.unlink()
        for node, text in texts.items():
            (where / f"{node}.txt").write_text(text)
    golden = {p.stem: p.read_text() for p in sorted(where.glob("*.txt"))}
    if golden == texts:
        return
    again = golden_texts(spec, tmp_path / "another", monkeypatch)
    if again != texts:
        pytest.fail(f"spec {spec}: two preparations differ: something random, dated or tied to the directory "
                    "reaches the text (see golden_ops.seed_secrets, Placeholders):\n"
                    + _diffs(texts, again, ("first", "second")), pytrace=False)
    pytest.fail(f"spec {spec}: the prepared ops differ from {where.relative_to(GOLDEN.parents[2])}/ (intended? "
                "CORRAL_GOLDEN_UPDATE=1 rewrites the files; read the diff before committing it):\n"
                + _diffs(golden, texts, ("golden", "prepared now")), pytrace=False)
