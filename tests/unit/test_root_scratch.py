"""Root never works in a fixed path under a world-writable directory (security review 3, N3; the class of round
two's L1 and round three's N6): a name in /tmp, /var/tmp or /dev/shm that anyone can make first. Every such path in
a string corral builds is a `mktemp` template, or named here with why it is safe. A scan of every string literal
(f-strings with their holes as {}), docstrings and comments aside."""

from __future__ import annotations

import pytest
import ast
import re
from pathlib import Path

from tests.unit.test_remote_python import _strings  # every string literal, docstrings aside

SRC = Path(__file__).resolve().parents[2] / "src" / "corral"
FIXED = re.compile(r"(?<![\w.])(/var/tmp|/tmp|/dev/shm)/[\w{$.-]")
# module -> why its fixed scratch path is safe
SAFE = {
    "workflows/images_pull.py": "the job's store: a random name (secrets.token_hex) made with `mkdir -m 0700` (no -p: "
                                "it fails if someone made it first), as the job runs",
}


def fixed_paths(src: Path = SRC) -> list[str]:
    found = []
    for path in sorted(src.rglob("*.py")):
        rel = path.relative_to(src).as_posix()
        for line, text in _strings(ast.parse(path.read_text())):
            for m in FIXED.finditer(text):
                if "mktemp" in text[max(0, m.start() - 40):m.start()]:
                    continue  # a template: mktemp makes a new name, 0700, or fails
                found.append(f"{rel}:{line}: {text[max(0, m.start() - 30):m.end() + 30]!r}")
    return found


@pytest.mark.attack
def test_no_fixed_scratch_path_in_a_world_writable_directory():
    bad = [f for f in fixed_paths() if f.split(":", 1)[0] not in SAFE]
    assert not bad, "a fixed path under /tmp, /var/tmp or /dev/shm (use mktemp -d, or a root-owned directory):\n" + \
        "\n".join(bad)


def test_the_scan_sees_a_fixed_name_and_passes_a_template(tmp_path):
    (tmp_path / "m.py").write_text('A = "rm -rf /var/tmp/corral-x && mkdir -p /var/tmp/corral-x"\n'
                                   'B = "tmp=$(mktemp -d /var/tmp/corral-y.XXXXXX)"\n'
                                   'C = f"/tmp/{name}.lock"\n')
    assert [f.split(": ", 1)[0] for f in fixed_paths(tmp_path)] == ["m.py:1", "m.py:1", "m.py:3"]
