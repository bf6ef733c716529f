"""What pyinfra only logs, captured per host during a run (and kept off the terminal).

pyinfra 3.10 reports several things only through its `pyinfra` logger: why an operation is a
no-op (`host.noop()`), the exit status of a command (debug), fact and command errors. A handler is
attached to that logger for the run (propagation off, restored after) and attributes each record
to the host of the current greenlet (pyinfra's `ctx_host`), or to the `[name]` prefix of the line.
Secrets: every MaskString / HiddenValue met in a command is remembered and scrubbed from text.
"""

from __future__ import annotations

import logging
import re
from collections import defaultdict
from contextlib import contextmanager

from corral.engine.pyinfra_seam import current_host, current_op_hash, secrets_in

ANSI = re.compile(r"\x1b\[[0-9;]*m")
PREFIX = re.compile(r"^\[(?P<host>[^\]]+)\]\s*(?:nested\s+)?")
MASK = "*MASKED*"


class Capture(logging.Handler):
    def __init__(self) -> None:
        super().__init__(level=logging.DEBUG)
        self.noops: dict[tuple[str, str | None], list[str]] = defaultdict(list)
        self.rc: dict[str, int] = {}
        self.messages: dict[str, list[str]] = defaultdict(list)  # warnings and errors per host
        self.general: list[str] = []                             # warnings with no host
        self.secrets: set[str] = set()

    def emit(self, record: logging.LogRecord) -> None:
        try:
            text = ANSI.sub("", record.getMessage())
        except Exception:  # noqa: BLE001 - a bad log call must not break a run
            return
        host = current_host()  # greenlet-local: the host whose op/fact is running here, or None
        name = getattr(host, "name", None)
        m = PREFIX.match(text)
        if m:
            name = name or m.group("host")
            text = text[m.end():]
        if text.startswith("noop: "):
            op_hash = current_op_hash(host)
            if name:
                self.noops[(name, op_hash)].append(text[len("noop: "):].strip())
        elif record.msg == "Command exit status: %i" and name and record.args:
            self.rc[name] = int(record.args[0])  # type: ignore[index,call-overload]  # pyinfra's one %i argument
        elif record.levelno >= logging.WARNING:
            (self.messages[name] if name else self.general).append(text.strip())

    def reasons(self, node: str, op_hash: str) -> list[str]:
        return self.noops.get((node, op_hash), [])

    # secrets -----------------------------------------------------------------------------

    def learn(self, command: object) -> None:
        """Remember the raw values of MaskString / HiddenValue bits of a (nested) command."""
        self.secrets |= secrets_in(command)

    def scrub(self, text: str | None) -> str | None:
        if not text:
            return text
        for secret in sorted(self.secrets, key=len, reverse=True):
            text = text.replace(secret, MASK)
        return text


@contextmanager
def capturing(capture: Capture):
    """Route the `pyinfra` and `paramiko` loggers to `capture` only, for the duration."""
    pyinfra_logger, paramiko_logger = logging.getLogger("pyinfra"), logging.getLogger("paramiko")
    saved = [(lg, lg.level, lg.propagate) for lg in (pyinfra_logger, paramiko_logger)]
    for lg in (pyinfra_logger, paramiko_logger):
        lg.addHandler(capture)
        lg.propagate = False
    pyinfra_logger.setLevel(logging.DEBUG)  # noop reasons and exit statuses are debug records
    hub, saved_stream = None, None
    try:
        import gevent

        hub = gevent.get_hub()
        saved_stream = hub.exception_stream
        hub.exception_stream = None  # greenlet errors go into results, not onto stderr
    except Exception:  # noqa: BLE001
        hub = None
    try:
        yield capture
    finally:
        for lg, level, propagate in saved:
            lg.removeHandler(capture)
            lg.setLevel(level)
            lg.propagate = propagate
        if hub is not None:
            hub.exception_stream = saved_stream
