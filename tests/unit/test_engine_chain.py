"""engine/chain.py: an op's consecutive shell commands run as one chain of subshells; what the chain
does is what the commands did one by one (run here with sh), masked values stay masked, uploads stay
steps of their own, and no corral operation reads a fact after its first command (the chain reads
ahead)."""

from __future__ import annotations

import ast
import io
import subprocess
from pathlib import Path

from pyinfra.api import FileUploadCommand, MaskString, StringCommand

from corral.engine.chain import chained, joined, parts
from corral.engine.shell import cmd
from corral.engine.timing import category


def sh(command: StringCommand) -> subprocess.CompletedProcess:
    return subprocess.run(["sh", "-c", command.get_raw_value()], capture_output=True, text=True, timeout=10)


def test_runs_of_shell_commands_become_one_and_uploads_stay_apart():
    upload = FileUploadCommand(io.BytesIO(b"x"), "/tmp/x")
    ops = [cmd("mkdir", "-p", "/a b"), cmd("install", "-m", "644", "/dev/null", "/a b/f"), upload,
           cmd("mv", "-f", "x", "y"), cmd("systemctl", "daemon-reload")]
    got = list(chained(lambda: iter(ops))())
    assert len(got) == 3 and got[1] is upload
    assert str(got[0]) == "( mkdir -p '/a b'\n) && ( install -m 644 /dev/null '/a b/f'\n)"
    assert parts(str(got[2])) == ["mv -f x y", "systemctl daemon-reload"]
    assert parts("systemctl restart x") == ["systemctl restart x"]


def test_each_command_keeps_its_own_exit_and_the_chain_stops_at_the_first_failure(tmp_path):
    early_exit = StringCommand("for i in 1 2; do true && exit 0; done; exit 1")  # readiness loops end so
    marker = tmp_path / "after"
    r = sh(joined([early_exit, cmd("touch", str(marker))]))
    assert r.returncode == 0 and marker.exists()  # `exit 0` ended its subshell, not the chain
    failing = StringCommand("false || { echo boom >&2; exit 3; }")
    marker.unlink()
    r = sh(joined([failing, cmd("touch", str(marker))]))
    assert r.returncode != 0 and "boom" in r.stderr and not marker.exists()
    r = sh(joined([StringCommand("cd /; trap 'echo bye' EXIT"), StringCommand("pwd")]))
    assert r.stdout.splitlines() == ["bye", str(Path.cwd())]  # its trap and cd stayed in its subshell
    r = sh(joined([StringCommand("echo one # a trailing comment"), StringCommand("cat <<EOF\ntwo\nEOF")]))
    assert r.returncode == 0 and r.stdout.splitlines() == ["one", "two"]  # the comment and the here-document end


def test_masked_values_stay_masked():
    c = joined([cmd("echo", MaskString("s3cret")), cmd("true")])
    assert "s3cret" not in str(c) and "*MASKED*" in str(c) and "s3cret" in c.get_raw_value()


def test_a_chain_is_classified_by_its_commands():
    op = {"name": "x | y", "status": "changed",
          "commands": ["( mkdir -p /etc/x\n) && ( install -m 644 -o root -g root /dev/null /etc/x/f.corral-new\n)",
                       "upload /etc/x/f.corral-new", "( mv -f /etc/x/f.corral-new /etc/x/f\n) && ( systemctl daemon-reload\n)"]}
    assert category(op) == "config"
    op["commands"] = ["( systemctl daemon-reload\n) && ( systemctl restart munge\n)"]
    assert category(op) == "services"


def test_no_operation_reads_a_fact_after_its_first_command():
    """The chain reads an op's commands ahead: an op whose later command depends on a fact read after
    an earlier one ran would see the node before it. None does (a read in a branch that returned
    before yielding is fine: checked by hand below)."""
    allowed = {("nvidia_repo.py", "cuda_repository")}  # the yields before the read are in a branch that returns
    found = []
    for path in Path("src/corral").rglob("*.py"):
        for f in ast.walk(ast.parse(path.read_text())):
            if not isinstance(f, ast.FunctionDef):
                continue
            yields = [n.lineno for n in ast.walk(f) if isinstance(n, (ast.Yield, ast.YieldFrom))]
            if not yields:
                continue
            for n in ast.walk(f):
                name = isinstance(n, ast.Call) and (getattr(n.func, "attr", None) or getattr(n.func, "id", None))
                if name in ("get_fact", "snapshot", "run_shell_command") and n.lineno > min(yields) \
                        and (path.name, f.name) not in allowed:
                    found.append(f"{path}:{n.lineno} {f.name}")
    assert not found, found
