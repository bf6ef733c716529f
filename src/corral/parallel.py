"""Run a function over items concurrently, safely under gevent: when the process is gevent-patched
(the CLI patches it for pyinfra), greenlets from a gevent pool; otherwise threads. (A
ThreadPoolExecutor whose workers fork subprocesses under gevent can deadlock in fork_and_watch.)"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

T = TypeVar("T")
R = TypeVar("R")


def pmap(fn: Callable[[T], R], items: Iterable[T], workers: int = 16) -> list[R]:
    items = list(items)
    size = max(1, min(workers, len(items)))
    try:
        from gevent import monkey
        patched = monkey.is_module_patched("socket")
    except ImportError:  # pragma: no cover - gevent comes with pyinfra
        patched = False
    if patched:
        from gevent.pool import Pool
        return list(Pool(size).map(fn, items))
    with ThreadPoolExecutor(max_workers=size) as pool:
        return list(pool.map(fn, items))
