"""One root error type; the CLI prints str(err) and exits with err.exit_code.

Every error says what failed, where (file:line or node), the offending value and how to fix it.
"""

from __future__ import annotations

from dataclasses import dataclass


class CorralError(Exception):
    """Root of every error corral expects. Anything else reaching the CLI is a bug."""

    exit_code = 1

    def __init__(self, message: str, *, where: str | None = None, value: object = None,
                 fix: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.where = where
        self.value = value
        self.fix = fix

    def __str__(self) -> str:
        text = f"{self.where}: {self.message}" if self.where else self.message
        if self.value is not None:
            text += f" (got {self.value!r})"
        if self.fix:
            text += f"; fix: {self.fix}"
        return text


class UsageError(CorralError):
    """Bad command-line usage or environment that prevents running at all."""

    exit_code = 2


@dataclass(frozen=True)
class Problem:
    """One located problem in a spec file."""

    where: str  # "cluster.yaml:12:5"
    message: str
    value: object = None
    fix: str | None = None

    def __str__(self) -> str:
        return str(CorralError(self.message, where=self.where, value=self.value, fix=self.fix))


class SpecError(CorralError):
    """The cluster spec is invalid; carries every problem found, each with its location."""

    exit_code = 2

    def __init__(self, problems: list[Problem]) -> None:
        self.problems = problems
        first = problems[0]
        super().__init__(first.message, where=first.where, value=first.value, fix=first.fix)

    def __str__(self) -> str:
        return "\n".join(str(p) for p in self.problems)


class HostToolError(UsageError):
    """A tool corral needs on the control host is missing."""


class NodeError(CorralError):
    """A command failed on a node."""

    def __init__(self, message: str, *, node: str, command: str | None = None,
                 rc: int | None = None, stderr_tail: str = "", fix: str | None = None) -> None:
        super().__init__(message, where=node, fix=fix)
        self.node = node
        self.command = command
        self.rc = rc
        self.stderr_tail = stderr_tail

    def __str__(self) -> str:
        text = super().__str__()
        if self.rc is not None:
            text += f" [rc={self.rc}]"
        if self.stderr_tail:
            text += "\n  " + self.stderr_tail.strip().replace("\n", "\n  ")
        return text
