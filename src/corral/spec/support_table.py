"""docs/releases.md's support matrix, generated from spec/support_matrix.py between two marker lines.

    python -m corral.spec.support_table --write docs/releases.md   # rewrite the block
    python -m corral.spec.support_table --check docs/releases.md   # exit 1 when it differs from the data

tests/unit/test_support_matrix.py fails when the block differs from the data."""

from __future__ import annotations

import sys
from pathlib import Path

from corral.spec.releases import RELEASES
from corral.spec.support import COMPONENTS, PENDING, SOURCES, Live, Offline, Refused, State
from corral.spec.support_matrix import MATRIX

BEGIN = "<!-- support-matrix:begin (generated: python -m corral.spec.support_table --write docs/releases.md) -->"
END = "<!-- support-matrix:end -->"
WORD = {Live: "live", Offline: "offline", Refused: "refused"}


def _summary(release: str, component: str) -> str:
    by: dict[str, list[str]] = {w: [] for w in WORD.values()}
    for source in SOURCES:
        cell = MATRIX.get((release, component, source))
        if cell is not None:
            by.setdefault(WORD[type(cell)], []).append(source)
    return "<br>".join(f"{'**' + w + '**' if w == 'live' else w}: {', '.join(s)}" for w, s in by.items() if s) or "—"


def _test(name: str) -> str:
    path, _, func = name.partition("::")
    return f"`{path.removeprefix('tests/')}::{func}`" + (" (being written)" if name in PENDING else "")


def _detail(cell: State) -> tuple[str, str]:
    if isinstance(cell, Live):
        return "**live**", _test(cell.test) + (f" ({cell.note})" if cell.note else "")
    if isinstance(cell, Offline):
        return "offline", f"{_test(cell.test)}; not run: {cell.not_run}"
    rule = "" if cell.rule == "support" else f" [{cell.rule}]"
    return "**refused**", f"{cell.why}{rule}; instead: {cell.fix}"


def table() -> str:
    releases = list(RELEASES)
    out = ["| component | " + " | ".join(f"`{r}`" for r in releases) + " |", "|---|" + "---|" * len(releases)]
    out += [f"| {label} | " + " | ".join(_summary(r, c) for r in releases) + " |" for c, label in COMPONENTS.items()]
    for r in releases:
        out += ["", f"#### `{r}`", "", "| component | source | state | proven by, or why refused |", "|---|---|---|---|"]
        for c, label in COMPONENTS.items():
            for s in SOURCES:
                cell = MATRIX.get((r, c, s))
                if cell is not None:
                    word, text = _detail(cell)
                    out.append(f"| {label} | {s} | {word} | {text.replace('|', '/')} |")
    return "\n".join(out) + "\n"


def rewrite(doc: str) -> str:
    """`doc` with the block between the markers replaced by table(); ValueError without the markers."""
    start, end = doc.index(BEGIN) + len(BEGIN), doc.index(END)
    return doc[:start] + "\n" + table() + doc[end:]


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[0] not in ("--write", "--check"):
        print(__doc__, file=sys.stderr)
        return 2
    path = Path(argv[1])
    doc = path.read_text()
    new = rewrite(doc)
    if argv[0] == "--write":
        path.write_text(new)
        return 0
    if new != doc:
        print(f"{path}: the support matrix differs from spec/support_matrix.py; rewrite it with --write", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
