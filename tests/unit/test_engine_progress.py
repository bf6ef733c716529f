"""Reporters: plain lines when not a terminal; rich never breaks on a stream."""

from __future__ import annotations

import io

from rich.console import Console

from corral.engine.progress import Event, PlainReporter, RichReporter, make_reporter


def test_plain_lines():
    out = io.StringIO()
    rep = PlainReporter(out)
    for e in [Event(None, None, "start", total=2), Event("gpu01", None, "connected"),
              Event("gpu01", "x", "running"), Event("gpu01", "x", "changed"),
              Event("gpu01", "y", "unchanged", "package memcached is installed"),
              Event("gpu02", None, "unreachable", "gpu02: connection refused"),
              Event("gpu01", "z", "changed", mode="plan"), Event(None, None, "end")]:
        rep(e)
    assert out.getvalue().splitlines() == [
        "apply: 2 step(s)", "node gpu01: op 'x' changed",
        "node gpu01: op 'y' unchanged (package memcached is installed)",
        "node gpu02: unreachable: gpu02: connection refused",
        "node gpu01: op 'z' would change", "apply: done"]


def test_make_reporter_picks_plain_for_non_tty():
    assert isinstance(make_reporter(io.StringIO()), PlainReporter)


def test_rich_reporter_runs():
    buf = io.StringIO()
    rep = RichReporter(Console(file=buf, force_terminal=True, width=80))
    rep(Event("n1", None, "unreachable", "n1: refused"))
    rep(Event(None, None, "start", total=2))
    rep(Event("n1", "x", "running"))
    rep(Event("n1", "x", "failed", "boom"))
    rep(Event("n1", "y", "changed"))
    rep(Event(None, None, "end"))
    text = buf.getvalue()
    assert "n1: refused" in text and "op 'x' failed (boom)" in text
