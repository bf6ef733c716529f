"""Load cluster.yaml: YAML (with positions) -> pydantic models -> expanded Cluster.

Every problem becomes a Problem located at file:line:col; nothing here touches the network.
"""

from __future__ import annotations

import difflib
import types
import typing
import warnings
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError
from ruamel.yaml import YAML
from ruamel.yaml.composer import MaxDepthExceededError, ReusedAnchorWarning
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.constructor import RoundTripConstructor
from ruamel.yaml.error import MarkedYAMLError, YAMLError
from ruamel.yaml.reader import ReaderError

from corral import limits
from corral.errors import Problem, SpecError
from corral.spec.cluster import Cluster, build_cluster
from corral.spec.models import ClusterSpec
from corral.spec.yaml_guard import FileTooLarge, GuardedComposer, YamlLimitError, read_bounded

Loc = tuple[str | int, ...]


class Locator:
    """Maps a path inside the document (('nodes', 0, 'gpus')) to 'file:line:col'."""

    def __init__(self, path: str, tree: Any) -> None:
        self.path = path
        self.tree = tree

    def __call__(self, loc: Loc, *, key: bool = False) -> str:
        node, line, col = self.tree, 0, 0
        try:
            for i, part in enumerate(loc):
                last = i == len(loc) - 1
                if isinstance(node, CommentedMap):
                    found = _find_key(node, part)
                    if found is _MISSING:
                        break
                    pos = node.lc.key(found) if (key and last) else node.lc.value(found)
                    line, col = pos
                    node = node[found]
                elif isinstance(node, CommentedSeq) and isinstance(part, int) and 0 <= part < len(node):
                    line, col = node.lc.item(part)
                    node = node[part]
                else:
                    break
            if (line, col) == (0, 0) and hasattr(node, "lc"):
                line, col = node.lc.line or 0, node.lc.col or 0
        except Exception:  # a position is best effort; never let it hide the real problem
            pass
        line, col = (v if isinstance(v, int) and v >= 0 else 0 for v in (line, col))
        return f"{self.path}:{line + 1}:{col + 1}"


_MISSING = object()


def _find_key(node: CommentedMap, part: str | int) -> Any:
    """The key of `node` that `part` names (keys are compared as strings too), if it has a position.

    Keys merged in with `<<: *anchor` have no position of their own in this mapping: _MISSING.
    """
    data = getattr(node.lc, "data", None) or {}
    for k in ([part] if _hashable(part) and part in data else []) + list(data):
        if k == part or str(k) == str(part):
            return k
    return _MISSING


def _hashable(value: Any) -> bool:
    try:
        hash(value)
    except TypeError:
        return False
    return True


MAX_VALUES = limits.DEFAULTS.max_yaml_values  # the default; limits.current() is what is enforced


class _TooLarge(Exception):
    pass


def _plain(node: Any, max_values: int) -> Any:
    """The YAML tree as plain dicts/lists with string keys (what the models validate)."""
    budget = [max_values]

    def walk(n: Any, seen: tuple[int, ...]) -> Any:
        budget[0] -= 1
        if budget[0] < 0:
            raise _TooLarge
        if isinstance(n, (dict, list)):
            if id(n) in seen:  # a recursive alias (`a: &x [*x]`)
                return None
            seen = seen + (id(n),)
            if isinstance(n, dict):
                return {k if isinstance(k, str) else str(k): walk(v, seen) for k, v in n.items()}
            return [walk(v, seen) for v in n]
        return n

    return walk(node, ())


def _model_at(loc: Loc) -> type[BaseModel] | None:
    """The pydantic model class that owns the field at `loc` (for key suggestions)."""
    ann: Any = ClusterSpec
    for part in loc[:-1]:
        ann = _step(ann, part)
        if ann is None:
            return None
    return _inner_model(ann)


def _members(annotation: Any) -> list[Any]:
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return [m for arg in typing.get_args(annotation) for m in _members(arg)]
    return [annotation]


def _step(annotation: Any, part: str | int) -> Any:
    """The annotation of the value at `part` inside a value annotated `annotation`."""
    for cand in _members(annotation):
        origin = typing.get_origin(cand)
        if isinstance(cand, type) and issubclass(cand, BaseModel):
            if isinstance(part, str) and part in cand.model_fields:
                return cand.model_fields[part].annotation
        elif origin is list and isinstance(part, int):
            return typing.get_args(cand)[0]
        elif origin is dict and isinstance(part, str):
            return typing.get_args(cand)[1]
    return None


def _inner_model(annotation: Any) -> Any:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in typing.get_args(annotation):
        found = _inner_model(arg)
        if found is not None:
            return found
    return None


def _real_loc(raw: tuple, data: Any, kind: str) -> tuple[Loc, Loc | None]:
    """Split pydantic's loc into the path inside the document and, when pydantic tried the
    members of a union (`list[str] | str`), the path to that union (else None).

    Parts that name nothing in the document are union-member tags ('str', 'list[str]') and are dropped.
    """
    real: list[str | int] = []
    union: Loc | None = None
    node = data
    for i, part in enumerate(raw):
        if isinstance(node, dict) and isinstance(part, str) and part in node:
            real.append(part)
            node = node[part]
        elif isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node):
            real.append(part)
            node = node[part]
        elif kind == "missing" and i == len(raw) - 1 and isinstance(node, dict):
            real.append(part)
        elif union is None:
            union = tuple(real)
    return tuple(real), union


def _short(value: object) -> object:
    """The offending value, or a summary of it when it is a large mapping/list."""
    if isinstance(value, (dict, list)) and len(repr(value)) > 120:
        kind = "mapping" if isinstance(value, dict) else "list"
        return f"a {kind} of {len(value)} item(s)"
    return value


def _pydantic_problems(exc: ValidationError, where: Locator, data: Any = None) -> list[Problem]:
    errors = exc.errors()
    located = [(err, *_real_loc(tuple(err["loc"]), data, err["type"])) for err in errors]
    # pydantic reports one error per member of a union: keep the member(s) that matched the
    # value's shape (their errors go deeper), or else merge them into one problem.
    unions: dict[Loc, list] = {}
    for item in located:
        if item[2] is not None:
            unions.setdefault(item[2], []).append(item)
    keep: list[tuple[dict, Loc]] = []
    merged_done: set[Loc] = set()
    for err, loc, union in located:
        if union is None:
            keep.append((err, loc))
            continue
        group = unions[union]
        deeper = [g for g in group if len(g[1]) > len(union)]
        if deeper:
            if len(loc) > len(union):
                keep.append((err, loc))
        elif union not in merged_done:
            merged_done.add(union)
            kinds = {g[0]["type"] for g in group}
            if all(k.startswith("ip_v") and k.endswith("_address") for k in kinds):
                keep.append(({**err, "type": "ip_any_address"}, union))
            else:
                msgs = list(dict.fromkeys(_words(g[0]["type"], g[0]) for g in group))
                keep.append(({**err, "msg": " or ".join(msgs), "type": "union_merged"}, union))
    problems = []
    missing = {loc for err, loc in keep if err["type"] == "missing"}
    for err, loc in keep:
        kind = err["type"]
        dotted = ".".join(_part(p) for p in loc) or "(top level)"
        if kind == "extra_forbidden":
            owner = _model_at(loc)
            valid = sorted(owner.model_fields) if owner else []
            close = difflib.get_close_matches(str(loc[-1]), valid, n=1)
            fix = f"did you mean {close[0]!r}?" if close else f"valid keys here: {', '.join(valid)}"
            if close and loc[:-1] + (close[0],) in missing:
                fix = f"did you mean {close[0]!r}? ({close[0]!r} is required)"
            problems.append(Problem(where(loc, key=True), f"unknown key {dotted!r}", None, fix))
        elif kind == "missing":
            if any(  # a close unknown key beside it explains it: report the typo once
                    e["type"] == "extra_forbidden" and l[:-1] == loc[:-1]
                    and difflib.get_close_matches(str(l[-1]), [str(loc[-1])], n=1)
                    for e, l in keep):
                continue
            problems.append(Problem(where(loc[:-1]), f"missing required key {dotted!r}", None,
                                    f"add '{loc[-1]}:'"))
        else:
            problems.append(Problem(where(loc), f"{dotted}: {_words(kind, err)}",
                                    _short(err.get("input")),
                                    _fix_for(kind, err)))
    return sorted(problems, key=_position)


_WORDS = {  # pydantic's error types in corral's words
    "string_type": "must be text", "int_type": "must be a whole number", "int_parsing": "must be a whole number",
    "int_from_float": "must be a whole number", "float_type": "must be a number", "float_parsing": "must be a number",
    "bool_type": "must be true or false", "bool_parsing": "must be true or false",
    "list_type": "must be a list, e.g. [a, b]", "dict_type": "must be a mapping (key: value)",
    "model_type": "must be a mapping of keys", "model_attributes_type": "must be a mapping of keys",
    "greater_than_equal": "must be at least {ge}", "less_than_equal": "must be at most {le}",
    "greater_than": "must be more than {gt}", "less_than": "must be less than {lt}",
    "too_short": "needs at least {min_length} item(s)", "too_long": "may have at most {max_length} item(s)",
    "string_too_short": "may not be empty", "string_too_long": "may be at most {max_length} characters",
    "string_pattern_mismatch": "does not have the expected form", "literal_error": "must be one of {expected}",
    "ip_v4_address": "must be an IPv4 address", "ip_v6_address": "must be an IPv6 address",
    "ip_any_address": "must be an IP address", "ip_v4_network": "must be an IPv4 network (address/prefix)",
}


def _words(kind: str, err: dict) -> str:
    """The problem in corral's words (pydantic's own wording never reaches the user)."""
    template = _WORDS.get(kind)
    if template is None:
        return str(err["msg"]).removeprefix("Value error, ")
    try:
        return template.format(**(err.get("ctx") or {}))
    except (KeyError, IndexError):
        return template.split(" {")[0]


def _part(p: str | int) -> str:
    """One step of a problem's key path, on one line: an odd key (a newline, spaces, dots) is quoted."""
    text = str(p)
    return text if text.replace("_", "").replace("-", "").replace("/", "").isalnum() or isinstance(p, int) \
        else repr(text)


def _position(problem: Problem) -> tuple[int, int]:
    """(line, col) of a 'file:line:col' location, for reporting problems in file order."""
    parts = problem.where.rsplit(":", 2)
    try:
        return int(parts[-2]), int(parts[-1])
    except (ValueError, IndexError):
        return 0, 0


def _fix_for(kind: str, err: dict) -> str | None:
    ctx = err.get("ctx") or {}
    if kind == "literal_error":
        return f"use one of {ctx.get('expected')}"
    if kind == "string_pattern_mismatch":
        return f"the value must match {ctx.get('pattern')}"
    if kind.startswith(("greater_than", "less_than")):
        return "use a value in the allowed range"
    if kind.startswith("ip_") and kind.endswith("_address"):
        return "give an IP address, e.g. 10.0.0.11"
    if kind.startswith("ip_v") and kind.endswith(("_network", "_interface")):
        return "give a network address with its prefix length, e.g. 10.213.0.0/24"
    if kind == "too_short":
        return f"give at least {ctx.get('min_length', 1)} item(s)"
    if kind in ("int_parsing", "int_type", "bool_parsing", "bool_type", "string_type", "list_type",
                "dict_type", "model_type", "union_merged"):
        return "give a value of the expected type"
    return None


MAX_DEPTH = 64  # nesting levels of YAML collections; a real spec needs under 10


def _one_line(text: object) -> str:
    return " ".join(str(text).split())


def parse_yaml(text: str, path: str) -> Any:
    """Parse YAML text; any failure is a SpecError located at path:line:col."""
    last: list[Any] = [None]  # the YAML node being constructed, to locate non-YAML errors

    class _Constructor(RoundTripConstructor):
        def construct_object(self, node: Any, deep: bool = False) -> Any:
            last[0] = node
            return super().construct_object(node, deep=deep)

    yaml = YAML(typ="rt")
    yaml.allow_duplicate_keys = False
    yaml.max_depth = MAX_DEPTH
    yaml.Constructor = _Constructor
    yaml.Composer = GuardedComposer  # counts alias expansion while composing (limits.py)
    fix = "correct the YAML syntax at that position"
    try:
        with warnings.catch_warnings():  # a re-defined anchor is legal YAML; don't print a warning
            warnings.simplefilter("ignore", ReusedAnchorWarning)
            return yaml.load(text)
    except YamlLimitError as exc:
        raise SpecError([Problem(f"{path}:{exc.line}:{exc.col}", exc.message, None, exc.fix)]) from None
    except MaxDepthExceededError as exc:
        mark = exc.problem_mark
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else f"{path}:1:1"
        raise SpecError([Problem(where, f"invalid YAML: nested deeper than {MAX_DEPTH} levels", None,
                                 "flatten the structure")]) from None
    except MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else f"{path}:1:1"
        message = _one_line(exc.problem or exc.context or "invalid YAML")
        if exc.problem and exc.context:
            # e.g. "found unexpected end of stream (while scanning a quoted scalar at line 1, column 7)"
            cmark = exc.context_mark
            at = f" at line {cmark.line + 1}, column {cmark.column + 1}" if cmark else ""
            message = f"{message.removeprefix('but ')} ({_one_line(exc.context)}{at})"
        raise SpecError([Problem(where, f"invalid YAML: {message}", None, fix)]) from None
    except ReaderError as exc:
        pos = exc.position if isinstance(exc.position, int) else 0
        line = text.count("\n", 0, pos) + 1
        col = pos - (text.rfind("\n", 0, pos) + 1) + 1
        char = exc.character if isinstance(exc.character, int) else 0
        raise SpecError([Problem(f"{path}:{line}:{col}",
                                 f"invalid YAML: unacceptable character #x{char:04x}: {_one_line(exc.reason)}",
                                 None, "remove the character or quote it as an escape")]) from None
    except YAMLError as exc:
        raise SpecError([Problem(f"{path}:1:1", f"invalid YAML: {_one_line(exc)}", None, fix)]) from None
    except Exception as exc:  # noqa: BLE001 - whatever ruamel raises on this text, it is the text's fault
        # a scalar ruamel cannot convert (`!!int abc`, `!!int ''`, `2020-13-45`, a 5000-digit number)
        mark = getattr(last[0], "start_mark", None)
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else f"{path}:1:1"
        message = "nesting too deep" if isinstance(exc, RecursionError) else _one_line(exc)
        raise SpecError([Problem(where, f"invalid YAML value: {message}", None,
                                 "write a plain value (quote it to make it a string)")]) from None


def _type_name(value: object) -> str:
    for t in type(value).__mro__:
        if t.__module__ == "builtins" and t is not object:
            return "list" if t is list else t.__name__
    return type(value).__name__


def _too_large(path: str, size: int, max_bytes: int) -> SpecError:
    return SpecError([Problem(f"{path}:1:1", f"the spec file is larger than {max_bytes} bytes", size,
                              f"split the cluster or {limits.raise_hint('max_spec_bytes')}")])


def load_text(text: str, path: str = "cluster.yaml") -> Cluster:
    lim = limits.current()
    if len(text) > lim.max_spec_bytes:  # each character is at least one byte
        raise _too_large(path, len(text), lim.max_spec_bytes)
    tree = parse_yaml(text, path)
    where = Locator(path, tree)
    start = "start with 'name: mycluster' and 'nodes:'"
    if tree is None:
        raise SpecError([Problem(f"{path}:1:1", "the spec file is empty", None, start)])
    if not isinstance(tree, dict):
        raise SpecError([Problem(f"{path}:1:1", "the spec must be a mapping of keys to values",
                                 _type_name(tree), start)])
    try:
        data = _plain(tree, lim.max_yaml_values)
    except (_TooLarge, RecursionError):  # GuardedComposer stops this sooner, with a position
        raise SpecError([Problem(f"{path}:1:1", f"the spec expands to more than {lim.max_yaml_values} values",
                                 None, "write the values out instead of nesting aliases")]) from None
    try:
        spec = ClusterSpec.model_validate(data)
    except ValidationError as exc:
        raise SpecError(_pydantic_problems(exc, where, data)) from None
    return build_cluster(spec, Path(path), where)


def load(path: str | Path) -> Cluster:
    p = Path(path)
    try:
        max_bytes = limits.current().max_spec_bytes
        text = read_bounded(p, max_bytes)  # refused before parsing, and before reading if it can be
    except FileTooLarge as exc:
        raise _too_large(str(p), exc.size, max_bytes) from None
    except FileNotFoundError:
        raise SpecError([Problem(str(p), "spec file not found", None,
                                 "pass --spec PATH, set CORRAL_SPEC, or run 'corral virtual up'")]) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise SpecError([Problem(str(p), f"cannot read spec: {exc}", None, None)]) from None
    return load_text(text, str(p))
