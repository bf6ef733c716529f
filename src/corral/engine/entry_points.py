"""Python's entry-point metadata, read once per process.

gevent's monkey-patching asks importlib.metadata for plugins on each of its ~25 patch events, and
pyinfra asks for its connectors each time it builds an inventory (twice, more for `@local`); every ask
reads each installed distribution's entry_points.txt again. The answer cannot change while corral runs
(nothing installs Python packages meanwhile), so it is read once: `patch_gevent()` took 66-73 ms with a
reading per event, 35-45 ms with one (this machine, 2 cores).
"""

from __future__ import annotations

import functools
import importlib.metadata as metadata
from collections.abc import Iterator
from contextlib import contextmanager


_read = metadata.entry_points  # the real reading, kept before read_once() stands in for it


@functools.cache
def _every():
    return _read()


def entry_points(**params):
    """`importlib.metadata.entry_points(**params)`, answered from the one reading."""
    return _every().select(**params) if params else _every()


@contextmanager
def read_once() -> Iterator[None]:
    """Inside the block, `importlib.metadata.entry_points` answers from the one reading."""
    before = metadata.entry_points
    metadata.entry_points = entry_points
    try:
        yield
    finally:
        metadata.entry_points = before
