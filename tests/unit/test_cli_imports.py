"""`corral --help` (and every command's start) pays only for what it uses: importing the CLI loads no
spec model, no pyinfra, no rich and no gevent (issue 38: the CLI's fixed cost); a command imports what it
uses when it runs, and only a command that may reach a node monkey-patches with gevent."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

HEAVY = ("corral.spec.models", "corral.spec.cluster", "corral.spec.rules", "pydantic", "pyinfra", "corral.deploy",
         "corral.workflows", "corral.engine.runner", "yaml", "rich", "gevent", "paramiko", "invoke", "corral.backup",
         "corral.bundle.build", "jinja2")
SPEC = Path(__file__).parents[1] / "fixtures" / "spec" / "slurm_valid.yaml"


def _loaded_after(code: str, modules=HEAVY) -> list[str]:
    """The `modules` (or a submodule of one) in sys.modules after `code` ran in a fresh interpreter."""
    probe = (f"import sys\n{code}\n"
             f"print(' '.join(m for m in {modules!r} if any(k == m or k.startswith(m + '.') for k in sys.modules)))")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.split()


def test_importing_the_cli_loads_nothing_heavy():
    assert _loaded_after("import corral.cli.main") == []


def test_help_imports_nothing_heavy_and_patches_nothing():
    code = ("import contextlib, io\nfrom corral.cli.main import main\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n    assert main(['--help']) == 0")
    assert _loaded_after(code) == []


def test_spec_check_runs_without_gevent_and_without_the_engine():
    code = ("import contextlib, io\nfrom corral.cli.main import main\n"
            f"with contextlib.redirect_stdout(io.StringIO()):\n    assert main(['spec', 'check', '-f', {str(SPEC)!r}]) == 0")
    assert _loaded_after(code, ("gevent", "pyinfra", "paramiko", "corral.engine.runner", "corral.deploy")) == []


def test_a_command_that_reaches_nodes_is_patched_before_it_runs():
    """`plan` (here its --help: the root callback runs before the command's options are read) patches."""
    code = ("import contextlib, io\nfrom corral.cli.main import main\nfrom gevent import monkey\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n    main(['plan', '--help'])\n"
            "print(json.dumps(monkey.is_module_patched('socket')))")
    done = subprocess.run([sys.executable, "-c", "import json\n" + code], capture_output=True, text=True, check=True)
    assert json.loads(done.stdout.splitlines()[-1]) is True


def test_help_still_lists_every_command():
    import typer

    from corral.cli.main import app
    names = sorted(typer.main.get_command(app).commands)
    assert {"up", "plan", "apply", "validate", "spec", "virtual", "bundle", "backup", "render", "import"} <= set(names)
    out = subprocess.run([sys.executable, "-m", "corral", "--help"], capture_output=True, text=True, check=True).stdout
    listed = {line.split()[0] for line in out.splitlines() if line.startswith("  ") and line.split()}
    assert set(names) <= listed, sorted(set(names) - listed)


def test_a_run_imports_the_backup_only_when_an_upgrade_takes_one():
    code = ("import corral.workflows.converge as converge\n"
            "seen = {}\n"
            "converge.converge = lambda cluster, mode, **kw: seen.update(kw) or 'result'\n"
            "from corral.cli import run_cmd\n"
            "assert run_cmd.engine_run(None, 'plan', None, 'plan', quiet=True) == 'result'\n"
            "print('before:', 'corral.backup.take' in sys.modules)\n"
            "import corral.backup.take as take\n"
            "take.take = lambda *a, **kw: ('taken', a, kw)\n"
            "print('passed on:', seen['backup']('cluster', now=1) == ('taken', ('cluster',), {'now': 1}))\n")
    done = subprocess.run([sys.executable, "-c", "import sys\n" + code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.splitlines() == ["before: False", "passed on: True"]
