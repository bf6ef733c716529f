"""An op's consecutive shell commands run as one: `( a\n) && ( b\n) && ( c\n)`, one SSH round trip
instead of three (each costs ~40 ms here, an RTT and a session on a real network).

Each command keeps its own subshell, so its `exit`, its traps and its `cd` end with it exactly as when
it ran alone, and the chain stops at the first that fails, as pyinfra stops at the first failing
command. Each closing parenthesis is on a line of its own, so a command's trailing comment or
here-document ends where it would have ended alone. An upload (SFTP) or a Python callback stays a step of its own, between chains. Masked values
stay masked (the parts are pyinfra's own StringCommands). Plan shows the commands one by one; the
journal of an apply shows what ran, the chains.

Safe because no corral operation reads a fact after its first command (the test of this module
checks every op's source): the chain is built by reading the op's commands ahead of running them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from corral.engine.pyinfra_seam import StringCommand

SEPARATOR = "\n) && ( "


def joined(commands: list[StringCommand]) -> StringCommand:
    if len(commands) == 1:
        return commands[0]
    bits: list = ["( "]
    for i, c in enumerate(commands):
        bits += [c, SEPARATOR if i < len(commands) - 1 else "\n)"]
    return StringCommand(*bits, _separator="")


def chained(generator: Callable[[], Iterator]) -> Callable[[], Iterator]:
    """pyinfra's command generator for one op on one node, its runs of plain shell commands joined."""
    def commands() -> Iterator:
        run: list[StringCommand] = []
        for c in generator():
            if type(c) is StringCommand and not c.connector_arguments:
                run.append(c)
                continue
            if run:
                yield joined(run)
                run = []
            yield c
        if run:
            yield joined(run)
    commands.corral_chained = True  # type: ignore[attr-defined]
    return commands


def parts(command: str) -> list[str]:
    """A journaled command's parts: the commands of a chain, or the command itself."""
    if command.startswith("( ") and command.endswith("\n)") and SEPARATOR in command:
        return [p.strip() for p in command[2:-2].split(SEPARATOR)]
    return [command]
