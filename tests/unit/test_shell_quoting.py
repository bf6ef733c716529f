"""Every value interpolated into a command is quoted: a scan of the code that builds commands.

Rules (engine/shell.py says why):
- deploy/, workflows/, checks/ and reports/ never call pyinfra's StringCommand themselves: `cmd()` quotes each part.
- An f-string that becomes a command (yielded by an operation, passed to cmd()/sh()/StringCommand/
  run_on/install_commands/readiness, or returned by a function named *_script/*_command(s)/*_cmd)
  interpolates only q()/shlex.quote() calls, UPPER_CASE constants, or numbers (int()/len()/
  literals). A line may opt out with `# shell-ok: <why>` (the reason is required).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from corral.engine.shell import cmd, q, sh

SRC = Path(__file__).resolve().parents[2] / "src" / "corral"
SCANNED = sorted([*SRC.glob("deploy/*.py"), *SRC.glob("workflows/*.py"), *SRC.glob("checks/*.py"),
                  *SRC.glob("reports/*.py"), *SRC.glob("fanout/*.py"),
                  SRC / "render" / "debs.py", SRC / "render" / "apt.py", SRC / "render" / "containers.py", SRC / "render" / "nvidia.py",
                  SRC / "render" / "acceptance.py"])
SINKS = {"Raw", "sh", "StringCommand", "run_on", "install_commands", "readiness", "run_when_changed", "sc"}
SAFE_CALLS = {"q", "quote", "int", "len", "str_int"}


def _safe(value: ast.expr) -> bool:
    if isinstance(value, ast.Call):
        f = value.func
        name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
        if name == "join" and len(value.args) == 1 and isinstance(value.args[0], (ast.GeneratorExp, ast.ListComp)):
            return _safe(value.args[0].elt)  # " ".join(q(p) for p in packages)
        return name in SAFE_CALLS or name.endswith("_script")  # a *_script() is scanned itself
    if isinstance(value, ast.Name):
        return value.id.isupper()
    if isinstance(value, ast.Attribute):
        return value.attr.isupper()
    if isinstance(value, ast.Constant):
        return True
    return False


def _unquoted(node: ast.JoinedStr) -> list[str]:
    return [ast.unparse(v.value) for v in node.values
            if isinstance(v, ast.FormattedValue) and not _safe(v.value)]


def _sink_name(call: ast.Call) -> str:
    f = call.func
    return f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""


def _exposed(expr: ast.AST):
    """f-strings inside `expr` that reach the shell as text: not those in a q() call or passed as a
    (quoted) part of cmd(), except inside Raw()."""
    if isinstance(expr, ast.JoinedStr):
        yield expr
        return
    if isinstance(expr, ast.Call) and _sink_name(expr) in SAFE_CALLS:
        return
    if isinstance(expr, ast.Call) and _sink_name(expr) == "cmd":
        for a in expr.args:
            if isinstance(a, ast.Call) and _sink_name(a) == "Raw":
                yield from _exposed(a)
        return
    for child in ast.iter_child_nodes(expr):
        yield from _exposed(child)


def _command_fstrings(tree: ast.AST):
    """(f-string node, why it is a command) for every f-string that reaches a shell."""
    for fn in ast.walk(tree):
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) and fn.name.endswith(
                ("_script", "_command", "_commands", "_cmd")):
            for node in ast.walk(fn):
                if isinstance(node, ast.Return) and node.value is not None:
                    for s in _exposed(node.value):
                        yield s, f"returned by {fn.name}()"
                if isinstance(node, ast.Call) and _sink_name(node) in ("append", "extend"):
                    for s in (x for a in node.args for x in _exposed(a)):
                        yield s, f"a line of {fn.name}()"
    for node in ast.walk(tree):
        if isinstance(node, (ast.Yield, ast.YieldFrom)) and node.value is not None:
            for s in _exposed(node.value):
                yield s, "yielded as a command"
        if isinstance(node, ast.Call) and _sink_name(node) in SINKS:
            for s in (x for a in [*node.args, *(k.value for k in node.keywords)] for x in _exposed(a)):
                yield s, f"passed to {_sink_name(node)}()"


def violations(path: Path) -> list[str]:
    text = path.read_text()
    lines = text.splitlines()
    tree = ast.parse(text)
    out, seen = [], set()
    rel = path.relative_to(SRC)
    for node in ast.walk(tree):
        if (isinstance(node, ast.Call) and _sink_name(node) == "StringCommand"
                and "shell-ok" not in lines[node.lineno - 1]):
            out.append(f"{rel}:{node.lineno}: StringCommand(...) joins parts unquoted: use cmd()")
    for s, why in _command_fstrings(tree):
        if (s.lineno, s.col_offset) in seen:
            continue
        seen.add((s.lineno, s.col_offset))
        bad = _unquoted(s)
        span = lines[s.lineno - 1:(s.end_lineno or s.lineno)]
        if bad and not any("# shell-ok:" in line for line in span):
            out.append(f"{rel}:{s.lineno}: f-string {why} interpolates {', '.join(bad)} unquoted: wrap in q()")
    return out


def test_no_unquoted_interpolation_reaches_a_shell():
    found = [v for p in SCANNED for v in violations(p)]
    assert found == [], "\n".join(found)


def test_the_scan_catches_what_it_should(tmp_path, monkeypatch):
    monkeypatch.setattr(__import__(__name__), "SRC", tmp_path)
    bad = tmp_path / "bad.py"
    bad.write_text("def op(url):\n    yield f'curl {url}'\n    yield StringCommand('curl', url)\n"
                   "def fetch_script(p):\n    return f'wget {p}'\n"
                   "def ok(url):\n    yield f'curl {q(url)} {TIMEOUT}'\n    yield f'echo {url}'  # shell-ok: test\n"
                   "    yield cmd('curl', f'{url}/x', Raw(f'> {url}'))\n")
    found = violations(bad)
    assert sorted(f.split(":")[1] for f in found) == ["2", "3", "5", "9"], found


@pytest.mark.parametrize("hostile", ["https://x/a;touch${IFS}/tmp/PWNED;#", "$(id)", "`id`", "a b", "'", "\n",
                                     "-rf", "a\"b"])
def test_cmd_and_q_keep_a_hostile_value_one_word(hostile):
    import shlex
    c = cmd("curl", "-o", "/tmp/x", hostile)
    assert shlex.split(c.get_raw_value()) == ["curl", "-o", "/tmp/x", hostile]
    assert shlex.split(f"echo {q(hostile)}") == ["echo", hostile]
    assert shlex.split(shlex.split(sh(f"echo {q(hostile)}").get_raw_value())[2]) == ["echo", hostile]
