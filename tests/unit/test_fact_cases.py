"""corral's facts tested as pyinfra tests its own: one JSON file per case under tests/facts/<fact>/, the
command a fact runs and the parser that reads its output, together.

A case:

    {"fact": "corral.facts.storage:MountPoint",      # module:Class, a pyinfra FactBase
     "args": {...},                                  # Fact().command(**args)
     "command": "...",                               # what it renders to (StringCommand.get_raw_value())
     "output": ...,                                  # what the node printed (see lines_of())
     "expected": <Fact().process(lines)>             # dataclasses as objects, tuples as lists
     | "raises": {"type": "corral.errors:CorralError", "match": "regex"}}

A shell fragment that is no FactBase of its own (facts/mig.py's COMMAND, part of NodeHardware) is named
by "fact" too, with its parser as "parser": "module:function" (called with the lines).
"""

from __future__ import annotations

import dataclasses
import difflib
import importlib
import json
import re
from pathlib import Path

import pytest
from pyinfra.api import FactBase, StringCommand

CASES = Path(__file__).resolve().parents[1] / "facts"
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
FILES = sorted(CASES.glob("*/*.json"))


def resolve(ref: str):
    module, _, name = ref.partition(":")
    return getattr(importlib.import_module(module), name)


def lines_of(output) -> list[str]:
    """The node's output as pyinfra hands it to process(): its lines. Given as a text, as
    {"file": <path under tests/fixtures>, "head": n (optional)}, or as a list of lines and such files
    (a command printing several things: marks, then each program's output)."""
    if isinstance(output, str):
        return output.splitlines()
    if isinstance(output, dict):
        found = (FIXTURES / output["file"]).read_text().splitlines()
        return found[:output["head"]] if "head" in output else found
    return [line for item in output for line in ([item] if isinstance(item, str) else lines_of(item))]


def plain(value):
    """A parsed value as JSON holds it."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}  # JSON's keys are strings (GPU indexes)
    return value


def command_and_parser(case: dict):
    target = resolve(case["fact"])
    args = case.get("args", {})
    if isinstance(target, type) and issubclass(target, FactBase):
        fact = target()
        return fact.command(**args), fact.process
    command = target(**args) if callable(target) else target
    return command, resolve(case["parser"])


def rendered(command) -> str:
    return command.get_raw_value() if isinstance(command, StringCommand) else command


@pytest.mark.parametrize("path", FILES, ids=[f"{p.parent.name}/{p.stem}" for p in FILES])
def test_fact_case(path: Path):
    case = json.loads(path.read_text())
    rel = path.relative_to(CASES.parents[1]) if path.is_relative_to(CASES.parents[1]) else path
    command, parse = command_and_parser(case)
    if rendered(command) != case["command"]:
        parts = [c.split("; ") for c in (case["command"], rendered(command))]  # a long command, part by part
        diff = "\n".join(difflib.unified_diff(*parts, "expected command", "the fact's command", lineterm=""))
        pytest.fail(f"{rel}: the fact's command differs from the case\n{diff}", pytrace=False)
    lines = lines_of(case["output"])
    if "raises" in case:
        with pytest.raises(resolve(case["raises"].get("type", "corral.errors:CorralError")),
                           match=case["raises"]["match"]):
            parse(lines)
        return
    got = plain(parse(lines))
    if got != case["expected"]:
        want = json.dumps(case["expected"], indent=1, sort_keys=True).splitlines()
        have = json.dumps(got, indent=1, sort_keys=True).splitlines()
        diff = "\n".join(difflib.unified_diff(want, have, "expected", "parsed", lineterm=""))
        pytest.fail(f"{rel}: the parsed output differs from the case\n{diff}", pytrace=False)


def test_every_case_is_complete_and_every_fact_has_cases():
    assert FILES, f"no cases under {CASES}"
    keys = {"description", "fact", "parser", "args", "command", "output", "expected", "raises"}
    for path in FILES:
        case = json.loads(path.read_text())
        assert set(case) <= keys and {"fact", "command", "output"} <= set(case), path
        assert ("expected" in case) != ("raises" in case), f"{path}: one of expected, raises"
        assert re.fullmatch(r"[\w.]+:\w+", case["fact"]), path
    covered = {json.loads(p.read_text())["fact"] for p in FILES}
    facts = set()
    import pkgutil

    import corral.deploy
    import corral.facts
    modules = [f"{pkg.__name__}.{m.name}" for pkg in (corral.facts, corral.deploy)
               for m in pkgutil.iter_modules(pkg.__path__)]  # every fact, wherever it is defined
    for module in modules:
        mod = importlib.import_module(module)
        facts |= {f"{module}:{name}" for name, obj in vars(mod).items()
                  if isinstance(obj, type) and issubclass(obj, FactBase) and obj is not FactBase
                  and obj.__module__ == module}
    assert sorted(facts - covered) == [], "facts without a case under tests/facts/"
