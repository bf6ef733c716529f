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

from pyinfra.api.command import MaskString, QuoteString, StringCommand
from pyinfra.api.hiddenvalue import HiddenValue
from pyinfra.context import ctx_host

ANSI = re.compile(r"\x1b\[[0-9;]*m")
PREFIX = re.compile(r"^\[(?P<host>[^\]]+)\]\s*(?:nested\s+)?")
MASK = "*MASKED*"


def _current_host():
    return ctx_host.get()  # greenlet-local: the host whose op/fact is running here, or None


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
        host = _current_host()
        name = getattr(host, "name", None)
        m = PREFIX.match(text)
        if m:
            name = name or m.group("host")
            text = text[m.end():]
        if text.startswith("noop: "):
            op_hash = getattr(host, "current_op_hash", None) or getattr(host, "executing_op_hash", None)
            if name:
                self.noops[(name, op_hash)].append(text[len("noop: "):].strip())
        elif record.msg == "Command exit status: %i" and name and record.args:
            self.rc[name] = int(record.args[0])  # type: ignore[index]
        elif record.levelno >= logging.WARNING:
            (self.messages[name] if name else self.general).append(text.strip())

    def reasons(self, node: str, op_hash: str) -> list[str]:
        return self.noops.get((node, op_hash), [])

    # secrets -----------------------------------------------------------------------------

    def learn(self, command: object) -> None:
        """Remember the raw values of MaskString / HiddenValue bits of a (nested) command."""
        stack = [command]
        while stack:
            item = stack.pop()
            if isinstance(item, QuoteString):
                stack.append(item.obj)
            elif isinstance(item, StringCommand):
                stack.extend(item.bits)
            elif isinstance(item, HiddenValue):
                if item.raw_value:
                    self.secrets.add(str(item.raw_value))
            elif isinstance(item, MaskString) and str(item):
                self.secrets.add(str.__str__(item))

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
