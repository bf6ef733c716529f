"""A module whose code runs when something first reads from it, not when it is imported.

paramiko's SSH-config support does `import invoke` when paramiko is imported (~33 ms here: invoke's task
collections, its vendored yaml, unittest.mock) for one feature, `Match exec`, that corral's ssh_config
never writes (engine/inventory.py). Deferred, that import costs nothing; the first attribute read runs
invoke's own code in place, so whoever does use it gets the real module.
"""

from __future__ import annotations

import importlib.util
import sys


def defer(name: str) -> bool:
    """Register `name` in sys.modules, its code to run on first attribute read; False if it is already
    imported or not installed (then nothing changes)."""
    if name in sys.modules:
        return False
    spec = importlib.util.find_spec(name)
    if spec is None or spec.loader is None:
        return False
    module, loader = importlib.util.module_from_spec(spec), spec.loader

    def __getattr__(attribute: str):  # PEP 562: only for names the module does not have yet
        del module.__dict__["__getattr__"]
        loader.exec_module(module)
        try:
            return module.__dict__[attribute]
        except KeyError:
            raise AttributeError(f"module {name!r} has no attribute {attribute!r}") from None

    module.__dict__["__getattr__"] = __getattr__  # what `module.__getattr__ = ...` sets
    sys.modules[name] = module
    return True
