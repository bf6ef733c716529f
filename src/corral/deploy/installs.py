"""What each file-writing operation installs, declared beside the operation:

    @installs(lambda path, content, **_: {path: content})
    @operation()
    def managed_file(path, content, want, ...): ...

Each call of the operation while a run prepares its deploys records the node's files (path -> content,
and whether the content is secret) in the run's context (engine/run_context.py `installs`). So what
apply would install can be read without SSH and without looking inside pyinfra: `corral render`'s test
prepares every declared component of a spec and compares the record with render's output file by file.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Mapping

from corral.engine import run_context
from corral.engine.pyinfra_seam import current_host, inner

BLOCK = ".corral-block"  # PATH + BLOCK: corral's marked block in PATH (the rest of the file is the node's)
Files = Callable[..., Mapping[str, object]]  # the operation's arguments -> {path: content}


def _secret_when_asked(files: Mapping[str, object], arguments: Mapping[str, object]) -> set[str]:
    """managed_file's rule: `secret` hides the content in plan, `mask` masks a secret inside it."""
    return set(files) if arguments.get("secret") or arguments.get("mask") else set()


def installs(files_of: Files, secret_of=_secret_when_asked):
    """Declare what an @operation installs: `files_of(**arguments)` -> {path: content};
    `secret_of(files, arguments)` -> the paths whose content is secret."""
    def wrap(op):
        signature = inspect.signature(inner(op))

        @functools.wraps(op)
        def call(*args, **kwargs):
            if run_context.in_run() and current_host() is not None:
                own = {k: v for k, v in kwargs.items() if k in signature.parameters}  # not pyinfra's name= etc.
                bound = signature.bind_partial(*args, **own)
                bound.apply_defaults()
                files = dict(files_of(**bound.arguments))
                secret = secret_of(files, bound.arguments)
                record = run_context.current().installs.setdefault(current_host().name, {})
                record.update({path: (content, path in secret) for path, content in files.items()})
            return op(*args, **kwargs)
        return call
    return wrap
