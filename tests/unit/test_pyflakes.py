"""corral's own code has no undefined name, unused import or other pyflakes finding (a NameError in a
rollout path is found here, not on a cluster)."""

from __future__ import annotations

from pathlib import Path

from pyflakes.api import checkPath
from pyflakes.reporter import Reporter

SRC = Path(__file__).resolve().parents[2] / "src" / "corral"


class Collect(Reporter):
    def __init__(self) -> None:
        self.found: list[str] = []

    def unexpectedError(self, filename, message):  # noqa: N802 - pyflakes' names
        self.found.append(f"{filename}: {message}")

    def syntaxError(self, filename, msg, lineno, offset, text):  # noqa: N802
        self.found.append(f"{filename}:{lineno}: {msg}")

    def flake(self, message):
        self.found.append(str(message))


def test_src_is_clean():
    report = Collect()
    for path in sorted(SRC.rglob("*.py")):
        checkPath(str(path), report)
    assert report.found == []


def test_the_check_finds_an_undefined_name(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("def f():\n    return upgrade_rollout.WHAT\n")
    report = Collect()
    checkPath(str(bad), report)
    assert len(report.found) == 1 and "undefined name 'upgrade_rollout'" in report.found[0]
