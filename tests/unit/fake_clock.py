"""A stand-in for the `time` module of the rollouts and removals: sleeping moves the clock, nothing
waits (monkeypatch a module's `time` with a Clock)."""

from __future__ import annotations


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def monotonic(self) -> float:
        return self.now

    def time(self) -> float:
        return 1_800_000_000.0 + self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds
