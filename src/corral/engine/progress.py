"""Progress events of a run and two reporters (rich on a terminal, plain lines otherwise).

The runner calls `on_event(Event)`; library code never prints, reporters do. Event statuses:
  run level (node None):  "start" (total = planned node×op steps), "end"
  node level (op None):   "connected", "unreachable" (detail: the error)
  op level:               "running", "changed", "unchanged", "failed", "skipped" (detail: reason)
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import IO, TYPE_CHECKING

from pyinfra.api import BaseStateCallback

from corral.engine.pyinfra_seam import host_has_op

if TYPE_CHECKING:
    from rich.progress import Progress, TaskID

OP_DONE = ("changed", "unchanged", "failed", "skipped")


@dataclass(frozen=True)
class Event:
    node: str | None
    op: str | None
    status: str
    detail: str | None = None
    total: int = 0
    mode: str = "apply"


EventSink = Callable[[Event], None]


def _quiet(sink: EventSink | None) -> EventSink:
    """A sink that never raises into the engine (a broken reporter must not break a run)."""
    def call(event: Event) -> None:
        if sink is None:
            return
        try:
            sink(event)
        except Exception:  # noqa: BLE001
            pass
    return call


class PyinfraEvents(BaseStateCallback):
    """Translates pyinfra's state callbacks (connection, op start) into corral events.

    Op outcomes are emitted by the runner itself: pyinfra fires `operation_host_success` before
    it records the op's commands, so the callback cannot tell "changed" from "unchanged".
    """

    def __init__(self, sink: EventSink, mode: str, op_name: Callable[[str, str], str]) -> None:
        self.sink, self.mode, self.op_name = sink, mode, op_name

    # pyinfra declares its callbacks static and calls them on the handler it is given: an instance here
    def host_connect(self, state, host):  # type: ignore[override]  # noqa: D102
        self.sink(Event(host.name, None, "connected", mode=self.mode))

    def operation_host_start(self, state, host, op_hash):  # type: ignore[override]  # noqa: D102
        if host_has_op(state, host, op_hash):
            self.sink(Event(host.name, self.op_name(host.name, op_hash), "running", mode=self.mode))


def _line(event: Event) -> str | None:
    if event.node is None:
        if event.status == "start":
            return f"{event.mode}: {event.total} step(s)"
        return f"{event.mode}: done"
    if event.op is None:
        if event.status == "unreachable":
            return f"node {event.node}: unreachable: {event.detail}"
        return None
    if event.status not in OP_DONE:
        return None
    verb = "would change" if event.mode == "plan" and event.status == "changed" else event.status
    text = f"node {event.node}: op '{event.op}' {verb}"
    if event.detail and event.status in ("failed", "skipped", "unchanged"):
        text += f" ({event.detail})"
    return text


class PlainReporter:
    """One line per finished op and per unreachable node: `node gpu01: op 'x' changed`; not verbose, only the ops
    that changed or failed (a no-op apply prints its start and end, not each converged op)."""

    def __init__(self, stream: IO[str] | None = None, *, verbose: bool = True) -> None:
        self.stream = stream or sys.stdout
        self.verbose = verbose

    def __call__(self, event: Event) -> None:
        if not self.verbose and event.status in ("unchanged", "skipped"):
            return
        line = _line(event)
        if line:
            print(line, file=self.stream, flush=True)


class RichReporter:
    """A live progress bar; changes, failures and unreachable nodes are printed above it."""

    def __init__(self, console=None) -> None:
        from rich.console import Console

        self.console = console or Console(stderr=True)
        self.progress: Progress | None = None
        self.task: TaskID | None = None

    def __call__(self, event: Event) -> None:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

        if event.node is None and event.status == "start":
            self.progress = Progress(TextColumn("{task.description}"), BarColumn(),
                                     MofNCompleteColumn(), console=self.console, transient=True)
            self.progress.start()
            self.task = self.progress.add_task(event.mode, total=event.total or None)
            return
        if event.node is None and event.status == "end":
            if self.progress is not None:
                self.progress.stop()
                self.progress = None
            return
        if self.progress is not None and self.task is not None and event.status == "running":
            self.progress.update(self.task, description=f"{event.node}: {event.op}")
            return
        if self.progress is not None and self.task is not None and event.op is not None and event.status in OP_DONE:
            self.progress.advance(self.task)
        style = {"failed": "red", "unreachable": "red", "changed": "yellow"}.get(event.status)
        line = _line(event)
        if style and line:
            console = self.progress.console if self.progress is not None else self.console
            console.print(line, style=style, markup=False, highlight=False)


def make_reporter(stream: IO[str] | None = None, verbose: bool = False) -> EventSink:
    """Rich progress on a terminal, plain lines otherwise (every finished op only when `verbose`)."""
    stream = stream or sys.stderr
    if getattr(stream, "isatty", lambda: False)():
        from rich.console import Console

        return RichReporter(Console(file=stream))
    return PlainReporter(stream, verbose=verbose)
