"""One run, one context (engine/run_context.py): made by engine.run, current while it runs, gone
after; nothing kept on pyinfra's State nor in module globals between runs."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest
from pyinfra import host
from pyinfra.api import deploy
from pyinfra.operations import server

import corral.deploy
from corral.deploy import nodestate
from corral.deploy.nodestate import Want, _union, register_for_run
from corral.engine import run_context
from corral.engine.run_context import RunContext

sys.path.insert(0, str(Path(__file__).parent))
from conftest_engine import engine_cluster, sshd  # noqa: E402,F401,F811

from corral.engine.runner import run  # noqa: E402


def test_outside_a_run_there_is_no_context(monkeypatch):
    monkeypatch.setattr(run_context, "_active", [])
    assert not run_context.in_run()
    with pytest.raises(RuntimeError, match="no corral run in progress"):
        run_context.current()
    with run_context.active(RunContext(mode="apply")) as ctx:
        assert run_context.current() is ctx and ctx.executing
    assert not run_context.in_run()


def test_a_run_want_is_the_runs_only(run_ctx):
    register_for_run(Want(paths=("/srv/only-this-run",), packages=("pkg-of-this-run",)))
    assert "/srv/only-this-run" in _union(Want()).paths and "pkg-of-this-run" in _union(Want()).packages
    with run_context.active(RunContext()):
        assert "/srv/only-this-run" not in _union(Want()).paths  # the next run starts without it
    assert not any("/srv/only-this-run" in w.paths for w in nodestate._DECLARED)


def test_deploys_register_per_run_wants_only_through_register_for_run():
    """`register()` is for module level (the Wants of every run); called in a function it would grow
    the process-wide list with every run's spec-derived Wants."""
    bad = []
    for path in sorted(Path(corral.deploy.__file__).parent.glob("*.py")):
        tree = ast.parse(path.read_text())
        for fn in ast.walk(tree):
            if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                bad += [f"{path.name}:{c.lineno}" for c in ast.walk(fn) if isinstance(c, ast.Call)
                        and getattr(c.func, "id", None) == "register"]
    assert not bad, f"register() inside a function (use register_for_run): {bad}"


def test_each_run_has_its_own_context_and_leaves_nothing_on_pyinfras_state(engine_cluster, run_ctx):
    seen: list[tuple[RunContext, object]] = []

    def make(path: str | None):
        @deploy("ctxtest")
        def ctxtest():
            if path:
                register_for_run(Want(paths=(path,)))
            seen.append((run_context.current(), host.state))
            server.shell(name="nothing", commands=["true"])
        return ctxtest

    first = run(engine_cluster, [make("/srv/first-run")], mode="plan", limit=["ctl1"], record=False)
    second = run(engine_cluster, [make(None)], mode="plan", limit=["ctl1"], record=False)
    assert first.ok and second.ok
    (ctx1, state1), (ctx2, state2) = seen
    assert ctx1 is not ctx2 and run_ctx not in (ctx1, ctx2)
    assert "/srv/first-run" in ctx1.wants["paths"] and not ctx2.wants["paths"]
    assert run_context.current() is run_ctx  # the run's context is gone with it
    assert not run_ctx.wants["paths"] and not run_ctx.notes and not run_ctx.snapshots
    for state in (state1, state2):
        assert not [k for k in vars(state) if "corral" in k], "corral hung state on pyinfra's State"
