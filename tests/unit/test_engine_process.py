"""What a process that may reach nodes sets up first (corral.engine.prepare_process): entry points read
once (engine/entry_points.py) and paramiko's import of invoke deferred (engine/deferred_import.py). Both
give the answers Python would have given; they only answer sooner."""

from __future__ import annotations

import importlib.metadata as metadata
import subprocess
import sys

from corral.engine import entry_points as once


def test_entry_points_read_once_give_what_each_reading_gives():
    for group in ("pyinfra.connectors", "console_scripts", "gevent.plugins.monkey.will_patch_all", "no.such.group"):
        assert sorted(once.entry_points(group=group)) == sorted(metadata.entry_points(group=group)), group
    assert type(once.entry_points()) is type(metadata.entry_points())


def test_read_once_stands_in_only_inside_its_block():
    before = metadata.entry_points
    with once.read_once():
        assert metadata.entry_points is once.entry_points
        assert {e.name for e in metadata.entry_points(group="pyinfra.connectors")} >= {"ssh", "local"}
    assert metadata.entry_points is before


def _run(code: str) -> list[str]:
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.split()


def test_paramiko_imports_without_running_invoke_and_invoke_still_works_when_used():
    out = _run("import sys\n"
               "from corral.engine.deferred_import import defer\n"
               "print(defer('invoke'), defer('invoke'), defer('no_such_module_here'))\n"
               "import paramiko.config\n"
               "print('invoke.collection' in sys.modules, paramiko.config.invoke_import_error is None)\n"
               "import invoke\n"
               "print(callable(paramiko.config.invoke.run), invoke.run.__module__, 'invoke.collection' in sys.modules)\n"
               "from invoke import Collection\n"
               "print(Collection.__module__)\n"
               "try:\n    invoke.no_such_name\nexcept AttributeError:\n    print('AttributeError')\n")
    assert out == ["True", "False", "False", "False", "True", "True", "invoke", "True",
                   "invoke.collection", "AttributeError"]


def test_prepare_process_patches_gevent_and_defers_invoke():
    out = _run("import sys\nfrom corral.engine import prepare_process\nprepare_process()\n"
               "from gevent import monkey\nimport pyinfra.api\n"
               "print(monkey.is_module_patched('socket'), 'paramiko' in sys.modules, 'invoke.collection' in sys.modules)")
    assert out == ["True", "True", "False"]
