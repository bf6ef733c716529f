"""Python that corral starts on nodes (as root, often in a directory users can write: a job step's
working directory, /tmp) never imports from its working directory: python3, python3.11, a venv's bin/python,
and the files corral installs as they are (render/files/). corral's own interpreter on the control host
(sys.executable) is out of this scan; its pip and servers run -I all the same.

`python3 -c` and `python3 -m` put the working directory first on sys.path; a module planted there (a
package named corral, a socket.py) would run as root. So every such invocation in src/corral carries
`-I` (isolated: no working directory, no PYTHON* variables, no user site) or `-P` (no working directory;
kept where a PYTHONPATH is needed), and a module that runs `-P` also starts in / (`cd /`, `srun
--chdir=/`). Checked twice: a scan of every string in the code, and the commands corral builds run here
from a hostile directory.
"""

from __future__ import annotations

import ast
import re
import subprocess
from pathlib import Path

import pytest

from corral.render.ready import http_ready
from corral.fanout import slurm
from corral.reports.prom_query import prom_command

SRC = Path(__file__).resolve().parents[2] / "src" / "corral"
# python as a command word: python3, python3.11, python{}, /usr/bin/python3, {venv}/bin/python (not python3-apt)
PYTHON = r"(?:[^\s'\"]*/)?python(?:[0-9.]+|\{\})?"
INVOCATION = re.compile(rf"(?<![\w./-]){PYTHON}(?![\w.-])((?:\s+-(?![cm]\b)[A-Za-z]+)*)\s+(-[cm])\b")
ISOLATING = {"-I", "-P"}


def _strings(tree: ast.AST):
    """Every string literal (f-strings with their holes as {}), skipping docstrings; and cmd()-style
    calls as their word lists."""
    docstrings = {id(n.body[0].value) for n in ast.walk(tree)
                  if isinstance(n, (ast.Module, ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef))
                  and n.body and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            yield node.lineno, node.value
        elif isinstance(node, ast.JoinedStr):
            yield node.lineno, "".join(v.value if isinstance(v, ast.Constant) else "{}" for v in node.values)
        elif isinstance(node, (ast.Call, ast.List, ast.Tuple)):
            items = node.args if isinstance(node, ast.Call) else node.elts
            words = [a.value if isinstance(a, ast.Constant) and isinstance(a.value, str) else "{}" for a in items]
            if words and words[0] == "{}" and ("-m" in words or "-c" in words) and not (
                    isinstance(items[0], ast.Attribute) and items[0].attr == "executable"):
                words[0] = "{}/python"  # a node's interpreter from a variable (a venv's): judged as one
            if any(re.fullmatch(PYTHON, w) for w in words):
                yield node.lineno, " ".join(words)


def invocations() -> list[tuple[str, int, str, set[str], str]]:
    """(module, line, text, flags, -c or -m). A script (`python3 /path/x.py`) is not one: sys.path[0] is
    then the script's own directory, root's (corral's programs live in /usr/local/lib/corral)."""
    found = []
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC).as_posix()
        for line, text in _strings(ast.parse(path.read_text())):
            if text.lstrip().startswith(("#!", "usage:", "<!--", '"""')) or rel == "layers.py":
                continue  # a shebang (a script file: sys.path[0] is its own directory), or words about a command
            for m in INVOCATION.finditer(text):
                flags = set(m.group(1).split())
                rest = m.group(2)
                found.append((rel, line, text, flags, rest))
    return found


def test_the_scan_sees_the_known_invocations():
    where = {(rel, rest) for rel, _l, _t, _f, rest in invocations()}
    assert ("fanout/slurm.py", "-m") in where and ("fanout/slurm.py", "-c") in where
    assert ("reports/prom_query.py", "-c") in where  # cmd("timeout", N, "python3", "-I", "-c", ...)
    assert ("render/ready.py", "-c") in where
    # a venv's interpreter, and the files installed as they are (the hub's configuration runs its culler)
    assert ("deploy/venvs.py", "-m") in where and ("render/files/jupyterhub_config.py", "-m") in where


def test_every_python3_c_or_m_is_isolated_from_its_working_directory():
    bad = [f"{rel}:{line}: {text.strip()[:120]!r}" for rel, line, text, flags, rest in invocations()
           if not flags & ISOLATING]
    assert not bad, "python3 -c/-m without -I or -P (it would import from its working directory):\n" + "\n".join(bad)


def test_a_module_running_python3_P_starts_in_root_and_every_srun_there_too():
    for rel in sorted({rel for rel, _l, _t, flags, _r in invocations() if "-P" in flags}):
        texts = [text for _line, text in _strings(ast.parse((SRC / rel).read_text()))]
        assert "cd / || exit 1" in texts, f"{rel}: runs python3 -P without starting in /"
        for text in texts:
            for m in re.finditer(r"\bsrun\s+-[^\n]*", text):
                assert "--chdir=/" in m.group(0), f"{rel}: {m.group(0)!r} runs its steps in the submitter's directory"


PLANT = "import os\nopen(os.environ['MARKER'], 'w').write('ran')\n"


@pytest.fixture()
def hostile(tmp_path):
    """A working directory a user filled: a package named corral and modules the clients import."""
    cwd = tmp_path / "cwd"
    (cwd / "corral").mkdir(parents=True)
    for name in ("corral/__init__.py", "corral/__main__.py", "socket.py", "urllib.py", "json.py", "sys.py"):
        (cwd / name).write_text(PLANT)
    return cwd, tmp_path / "marker"


def _run(command: str, cwd: Path, marker: Path) -> None:
    subprocess.run(["bash", "-c", command], cwd=cwd, env={"PATH": "/usr/bin:/bin:/usr/local/bin", "MARKER": str(marker),
                   "SLURMD_NODENAME": "gpu01"}, capture_output=True, text=True, timeout=60)
    assert not marker.exists(), f"the planted module ran: {command[:200]!r}"


@pytest.mark.parametrize("command", [
    prom_command("127.0.0.1", 9, "up", 1),
    http_ready("127.0.0.1", 9, "/-/ready"),
], ids=["prom_query", "http_ready"])
def test_the_clients_never_import_from_a_hostile_working_directory(hostile, command):
    _run(command, *hostile)


def test_the_fanout_task_never_imports_from_a_hostile_working_directory(hostile):
    cwd, marker = hostile
    task = slurm.task("0" * 16, "0.0", "/nonexistent/snapshot.json", 5)
    probe = next(line for line in task.splitlines() if line.startswith("py=$("))
    converge = next(line for line in task.splitlines() if " -m corral " in line)
    _run(probe, cwd, marker)
    _run(converge.replace("PYTHONPATH=", "PYTHONPATH=/nonexistent"), cwd, marker)
    _run(task, cwd, marker)  # the whole task (it stops early: no runtime here)
