"""One way to build shell commands: every value is quoted.

pyinfra's `StringCommand("curl", url)` joins its parts *unquoted*: a value with `;` or `$(...)` becomes
shell. corral builds commands with `cmd(...)` instead, which quotes every part except the shell
syntax corral writes itself, marked `Raw` (operators, redirections, `$var` references), and scripts
with `q()` around every interpolated value. tests/unit/test_shell_quoting.py scans deploy/, workflows/, checks/ and
the script renderers and fails on an unquoted interpolation.
"""

from __future__ import annotations

import shlex

from corral.engine.pyinfra_seam import MaskString, QuoteString, StringCommand


class Raw(str):
    """Shell syntax written by corral itself (`&&`, `||`, `>`, `2>/dev/null`, `"$tmp"`), never a value
    that came from the spec or a node."""


AND, OR, SEMI = Raw("&&"), Raw("||"), Raw(";")


def q(value: object) -> str:
    """A value as one shell word, whatever it holds."""
    return shlex.quote(str(value))


def cmd(*parts: object) -> StringCommand:
    """A command whose every part is one quoted word, except `Raw` parts, nested commands and masked
    values (pyinfra's MaskString, which it quotes and hides in output)."""
    out: list = []
    for p in parts:
        if isinstance(p, (Raw, StringCommand, QuoteString)):
            out.append(p)
        elif isinstance(p, MaskString):
            out.append(QuoteString(p))
        else:
            out.append(QuoteString(str(p)))
    return StringCommand(*out)


def sh(script: str) -> StringCommand:
    """`bash -c SCRIPT`: the script travels as one quoted word (its values already q()-quoted)."""
    return StringCommand("bash", "-c", QuoteString(script))
