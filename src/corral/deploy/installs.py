"""What each file-writing operation installs, declared beside the operation:

    @installs(lambda path, content, **_: {path: content})
    @operation()
    def managed_file(path, content, want, ...): ...

Each call of the operation while a run prepares its deploys records the node's files (path -> content,
and whether the content is secret) in the run's context (engine/run_context.py `installs`). So what
apply would install can be read without SSH and without looking inside pyinfra: `corral render`'s tests
prepare every declared component of a spec and compare the record with render's output file by file.

The op's own result carries the same declaration (engine/notes.py `declare_files`, results.OpResult.files): each
path with the sha256 of its content, so the run's journal says which files each op wrote or kept and what they
held. A secret's digest is never recorded (a low-entropy secret inside known text could be guessed from it).
Content None: made on the node from what is there (an edit of the node's own file, a record of its state), known
only when the op runs: no digest, and `corral render` names the file in NOTES.txt instead of writing it.
"""

from __future__ import annotations

import functools
import hashlib
import inspect
from collections.abc import Callable, Mapping

from corral.engine import notes, run_context
from corral.engine.pyinfra_seam import current_host, inner, op_hashes

BLOCK = ".corral-block"  # PATH + BLOCK: corral's marked block in PATH (the rest of the file is the node's)
Files = Callable[..., Mapping[str, object]]  # the operation's arguments -> {path: content (None: made on the node)}


def _secret_when_asked(files: Mapping[str, object], arguments: Mapping[str, object]) -> set[str]:
    """managed_file's rule: `secret` hides the content in plan, `mask` masks a secret inside it."""
    return set(files) if arguments.get("secret") or arguments.get("mask") else set()


def record_of(path: str, content: object, secret: bool) -> dict:
    """One file as the run's record keeps it (results.OpResult.files): never a secret's digest."""
    data = content.encode() if isinstance(content, str) else content
    digest = hashlib.sha256(data).hexdigest() if isinstance(data, bytes) and not secret else None
    return {"path": path, "sha256": digest, "secret": secret, "from_node": content is None}


def installs(files_of: Files, secret_of=_secret_when_asked):
    """Declare what an @operation installs: `files_of(**arguments)` -> {path: content (None: made on the node)};
    `secret_of(files, arguments)` -> the paths whose content is secret."""
    def wrap(op):
        signature = inspect.signature(inner(op))

        @functools.wraps(op)
        def call(*args, **kwargs):
            host = current_host()
            if not run_context.in_run() or host is None:
                return op(*args, **kwargs)
            own = {k: v for k, v in kwargs.items() if k in signature.parameters}  # not pyinfra's name= etc.
            bound = signature.bind_partial(*args, **own)
            bound.apply_defaults()
            files = dict(files_of(**bound.arguments))
            secret = secret_of(files, bound.arguments)
            record = run_context.current().installs.setdefault(host.name, {})
            record.update({path: (content, path in secret) for path, content in files.items()})
            order = getattr(host, "op_hash_order", None)  # a real host (tests call with a stand-in)
            before = len(op_hashes(host)) if order is not None else 0
            meta = op(*args, **kwargs)
            added = op_hashes(host)[before:] if order is not None else []
            if added:  # the op just added: its result carries what it installs
                notes.declare_files(host.name, added[-1], [record_of(path, content, path in secret)
                                                           for path, content in files.items()])
            return meta
        return call
    return wrap
