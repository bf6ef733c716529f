"""Load cluster.yaml: YAML (with positions) -> pydantic models -> expanded Cluster.

Every problem becomes a Problem located at file:line:col; nothing here touches the network.
"""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError
from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.error import MarkedYAMLError, YAMLError

from corral.errors import Problem, SpecError
from corral.spec.cluster import Cluster, build_cluster
from corral.spec.models import ClusterSpec

Loc = tuple[str | int, ...]


class Locator:
    """Maps a path inside the document (('nodes', 0, 'gpus')) to 'file:line:col'."""

    def __init__(self, path: str, tree: Any) -> None:
        self.path = path
        self.tree = tree

    def __call__(self, loc: Loc, *, key: bool = False) -> str:
        node, line, col = self.tree, 0, 0
        for i, part in enumerate(loc):
            last = i == len(loc) - 1
            if isinstance(node, CommentedMap) and part in node:
                pos = node.lc.key(part) if (key and last) else node.lc.value(part)
                line, col = pos
                node = node[part]
            elif isinstance(node, CommentedSeq) and isinstance(part, int) and 0 <= part < len(node):
                line, col = node.lc.item(part)
                node = node[part]
            else:
                break
        if (line, col) == (0, 0) and hasattr(node, "lc"):
            line, col = node.lc.line, node.lc.col
        return f"{self.path}:{line + 1}:{col + 1}"


def _plain(node: Any) -> Any:
    if isinstance(node, dict):
        return {str(k) if not isinstance(k, (str, int)) else k: _plain(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_plain(v) for v in node]
    return node


def _model_at(loc: Loc) -> type[BaseModel] | None:
    """The pydantic model class that owns the field at `loc` (for key suggestions)."""
    model: Any = ClusterSpec
    for part in loc:
        if isinstance(part, int) or model is None:
            continue
        field = model.model_fields.get(part) if isinstance(model, type) else None
        if field is None:
            return model if part == loc[-1] else None
        model = _inner_model(field.annotation)
    return model


def _inner_model(annotation: Any) -> Any:
    import typing
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in typing.get_args(annotation):
        found = _inner_model(arg)
        if found is not None:
            return found
    return None


def _pydantic_problems(exc: ValidationError, where: Locator) -> list[Problem]:
    problems = []
    for err in exc.errors():
        loc = tuple(p for p in err["loc"] if not (isinstance(p, str) and "[" in p))
        kind = err["type"]
        dotted = ".".join(str(p) for p in loc) or "(top level)"
        if kind == "extra_forbidden":
            owner = _model_at(loc)
            valid = sorted(owner.model_fields) if owner else []
            close = difflib.get_close_matches(str(loc[-1]), valid, n=1)
            fix = f"did you mean {close[0]!r}?" if close else f"valid keys here: {', '.join(valid)}"
            problems.append(Problem(where(loc, key=True), f"unknown key {dotted!r}", None, fix))
        elif kind == "missing":
            problems.append(Problem(where(loc[:-1]), f"missing required key {dotted!r}", None,
                                    f"add '{loc[-1]}:'"))
        else:
            problems.append(Problem(where(loc), f"{dotted}: {err['msg']}", err.get("input"),
                                    _fix_for(kind, err)))
    return problems


def _fix_for(kind: str, err: dict) -> str | None:
    ctx = err.get("ctx") or {}
    if kind == "literal_error":
        return f"use one of {ctx.get('expected')}"
    if kind == "string_pattern_mismatch":
        return f"the value must match {ctx.get('pattern')}"
    if kind.startswith(("greater_than", "less_than")):
        return "use a value in the allowed range"
    if kind in ("int_parsing", "int_type", "bool_parsing", "bool_type", "string_type", "list_type",
                "dict_type", "model_type"):
        return "give a value of the expected type"
    return None


def parse_yaml(text: str, path: str) -> Any:
    yaml = YAML(typ="rt")
    yaml.allow_duplicate_keys = False
    try:
        return yaml.load(text)
    except MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else f"{path}:1:1"
        message = (exc.problem or exc.context or "invalid YAML").strip()
        raise SpecError([Problem(where, f"invalid YAML: {message}", None,
                                 "correct the YAML syntax at that position")]) from None
    except YAMLError as exc:
        raise SpecError([Problem(f"{path}:1:1", f"invalid YAML: {exc}", None, None)]) from None


def load_text(text: str, path: str = "cluster.yaml") -> Cluster:
    tree = parse_yaml(text, path)
    where = Locator(path, tree)
    if not isinstance(tree, dict):
        raise SpecError([Problem(f"{path}:1:1", "the spec must be a mapping of keys to values",
                                 type(tree).__name__, "start with 'name: mycluster' and 'nodes:'")])
    try:
        spec = ClusterSpec.model_validate(_plain(tree))
    except ValidationError as exc:
        raise SpecError(_pydantic_problems(exc, where)) from None
    return build_cluster(spec, Path(path), where)


def load(path: str | Path) -> Cluster:
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SpecError([Problem(str(p), "spec file not found", None,
                                 "pass --spec PATH, set CORRAL_SPEC, or run 'corral virtual up'")]) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise SpecError([Problem(str(p), f"cannot read spec: {exc}", None, None)]) from None
    return load_text(text, str(p))
