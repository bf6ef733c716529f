"""Size guards for reading YAML: a bounded file read and a composer that counts alias expansion.

ruamel composes an alias as a reference to its anchor's node, so a few lines of nested aliases
("billion laughs") stay small until something walks or prints the tree. GuardedComposer counts every
node while composing, an alias at the full size of what it stands for, and stops at the limits of
corral.limits; nothing is expanded to count."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.composer import Composer
from ruamel.yaml.events import AliasEvent

from corral import limits


class YamlLimitError(Exception):
    """The YAML is over a limit; line and col are 1-based."""

    def __init__(self, message: str, line: int, col: int, fix: str) -> None:
        super().__init__(message)
        self.message, self.line, self.col, self.fix = message, line, col, fix


class GuardedComposer(Composer):
    chars_limit = "max_spec_bytes"  # the limit on characters of scalars, aliases expanded

    def __init__(self, loader: Any = None) -> None:
        super().__init__(loader=loader)
        lim = limits.current()
        self.max_values, self.max_aliases = lim.max_yaml_values, lim.max_yaml_aliases
        self.max_chars = getattr(lim, self.chars_limit)
        self.values = self.chars = self.aliases = 0
        self.sizes: dict[int, tuple[int, int]] = {}  # id(anchored node) -> (values, chars), aliases expanded

    def compose_node(self, parent: Any, index: Any) -> Any:
        mark = self.parser.peek_event().start_mark
        if self.parser.check_event(AliasEvent):
            node = super().compose_node(parent, index)
            self.aliases += 1
            if self.aliases > self.max_aliases:
                raise YamlLimitError(f"the file has more than {self.max_aliases} aliases", mark.line + 1,
                                     mark.column + 1, "write the values out instead of using so many "
                                     f"aliases, or {limits.raise_hint('max_yaml_aliases')}")
            # an alias of a node still being composed (`a: &x [*x]`) counts as one value
            self._count(*self.sizes.get(id(node), (1, 0)), mark, alias=True)
            return node
        before = self.values, self.chars
        node = super().compose_node(parent, index)
        self._count(1, len(node.value) if isinstance(node.value, str) else 0, mark, alias=False)
        if getattr(node, "anchor", None) is not None:
            self.sizes[id(node)] = (self.values - before[0], self.chars - before[1])
        return node

    def _count(self, values: int, chars: int, mark: Any, *, alias: bool) -> None:
        self.values, self.chars = self.values + values, self.chars + chars
        where = (mark.line + 1, mark.column + 1)
        if self.values > self.max_values:
            what = "expands to more than {} values through its aliases" if alias else \
                "has more than {} values"
            fix = "write the values out instead of nesting aliases" if alias else "make the file smaller"
            raise YamlLimitError("the file " + what.format(self.max_values), *where,
                                 f"{fix}, or {limits.raise_hint('max_yaml_values')}")
        if self.chars > self.max_chars:  # only aliases can make more characters than the file has
            raise YamlLimitError(f"the file expands to more than {self.max_chars} characters through its "
                                 "aliases", *where, "write the values out instead of repeating long aliased "
                                 f"values, or {limits.raise_hint(self.chars_limit)}")


def guarded_yaml(chars_limit: str = "max_spec_bytes") -> YAML:
    """A round-trip YAML loader whose composer enforces the YAML limits; aliases may expand the text
    of the file to at most the limit named `chars_limit` (a field of limits.Limits)."""
    yaml = YAML(typ="rt")
    yaml.Composer = type("GuardedComposer", (GuardedComposer,), {"chars_limit": chars_limit})
    return yaml


class FileTooLarge(Exception):
    def __init__(self, size: int) -> None:
        super().__init__(size)
        self.size = size  # the size found, or a lower bound of it


def read_bounded(path: Path, max_bytes: int) -> str:
    """The UTF-8 text of path; FileTooLarge (before reading, where the size is known) if it is
    larger than max_bytes. OSError and UnicodeDecodeError as Path.read_text raises them."""
    size = path.stat().st_size
    if size > max_bytes:
        raise FileTooLarge(size)
    with open(path, "rb") as f:
        data = f.read(max_bytes + 1)  # a pipe or device reports no size: read one byte too many
    if len(data) > max_bytes:
        raise FileTooLarge(len(data))
    return data.decode("utf-8")
