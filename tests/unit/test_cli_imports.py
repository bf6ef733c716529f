"""`corral --help` (and every command's start) pays only for what it uses: importing the CLI loads no
spec model, no pyinfra and no deploy (issue 38: the CLI's fixed cost); a command that reads the spec
imports it when it runs."""

from __future__ import annotations

import subprocess
import sys

HEAVY = ("corral.spec.models", "corral.spec.cluster", "corral.spec.rules", "pydantic", "pyinfra", "corral.deploy",
         "corral.workflows", "corral.engine.runner", "yaml")


def test_importing_the_cli_loads_nothing_heavy():
    probe = ("import sys; import corral.cli.main; "
             f"print(' '.join(m for m in {HEAVY!r} if any(k == m or k.startswith(m + '.') for k in sys.modules)))")
    loaded = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout.split()
    assert loaded == []


def test_help_still_lists_every_command():
    out = subprocess.run([sys.executable, "-m", "corral", "--help"], capture_output=True, text=True, check=True).stdout
    for command in ("up", "plan", "apply", "validate", "spec", "virtual", "bundle", "backup", "render", "import"):
        assert command in out, command
