"""Engine: spec -> pyinfra inventory; run deploys (plan or apply) in parallel; per-node results;
progress events; SQLite journal; pinned SSH host keys.

Parallel SSH needs gevent's monkey patching, done once, as early as possible in the process
(before paramiko/ssl/threading are used): the CLI's root callback calls `prepare_process()` before any
command that may reach a node runs (cli/main.py; the offline ones skip its ~40 ms of imports).
Without it pyinfra still works, but connects to nodes one after another.
"""

from __future__ import annotations

import sys


def patch_gevent() -> bool:
    """gevent.monkey.patch_all() once; returns True if patched now, False if it already was."""
    from gevent import monkey

    if monkey.is_module_patched("socket"):
        return False
    from corral.engine.entry_points import read_once
    with read_once():  # gevent looks its plugins up on every patch event
        monkey.patch_all()
    return True


def prepare_process() -> None:
    """What a process that may reach nodes does first: gevent's patching, and paramiko's import of
    invoke deferred (engine/deferred_import.py) before anything imports paramiko."""
    from corral.engine.deferred_import import defer

    patch_gevent()
    if "paramiko" not in sys.modules:
        defer("invoke")


def gevent_patched() -> bool:
    from gevent import monkey

    return monkey.is_module_patched("socket")


def __getattr__(name: str):  # lazy: importing corral.engine must not import pyinfra/paramiko
    if name == "run":
        from corral.engine.runner import run
        return run
    if name in ("RunResult", "NodeResult", "OpResult"):
        from corral.engine import results
        return getattr(results, name)
    if name == "build_inventory":
        from corral.engine.inventory import build_inventory
        return build_inventory
    raise AttributeError(name)


__all__ = ["patch_gevent", "prepare_process", "gevent_patched", "run", "build_inventory", "RunResult", "NodeResult",
           "OpResult"]
