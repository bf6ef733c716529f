"""corral's operations tested as pyinfra tests its own: one JSON file per case under tests/operations/<op>/,
node state and facts in, the commands (or the no-op and its reason) out.

A case:

    {"op": "corral.deploy.operations:managed_file",     # module:function (an @operation)
     "args": {...},                                      # its arguments (see decode() for objects)
     "snapshot": {"files": {path: {kind, mode, user, group, sha256 | content} | null},
                  "services": {unit: [active, enabled]}, "packages": {name: version},
                  "blocks": {path: sha256 | {"content": block}}, "apt_lists_age_s": 120, "container": "none",
                  "local_routes": {address: has quickack}},
     "facts": {"FileContents": {path: [lines] | null}, "LinuxDistribution": {...}},   # host.get_fact answers
     "host_data": {"ssh_user": "corral"},                # host.data
     "description": "...",                               # what the case shows
     "expected": {"commands": [...], "noop": "reason" | null, "disruption": "..." | null,
                  "diff": "..." (optional), "uploads": {dest: text} (optional),
                  "error": {"type": "corral.errors:CorralError", "match": "regex"} (instead of the rest)}}

The operation runs with a stand-in pyinfra host in pyinfra's own context (`ctx_host`), so nothing is
monkeypatched: `snapshot()` (deploy/nodestate.py) asks the host for its NodeState fact and gets the case's
"snapshot"; every other fact comes from "facts" (a fact asked with `path=` is looked up by that path; a
fact the case does not give fails the test, and so does one it gives that is never asked for); annotate()
(engine/notes.py) keeps its note under the host's current op, where the runner reads it back.

Commands are compared as pyinfra renders them (StringCommand.get_raw_value()); a FileUploadCommand is
"upload <dest>", or "upload <dest> via <temp>" when it is staged through a temp file (a non-root SSH user);
an expected command given as a list of lines is those lines joined with newlines (scripts); a text (a
"content", "diff" or upload) given as a list of lines is each line ended by a newline. A snapshot file
given with "content" gets its sha256 from it; kind, mode, user and group default to file, 644, root.
"""

from __future__ import annotations

import difflib
import hashlib
import importlib
import inspect
import json
import re
from pathlib import Path
from types import SimpleNamespace

import pytest
from pyinfra.api import FileUploadCommand, StringCommand
from pyinfra.context import ctx_host

from corral.deploy.nodestate import Snapshot, Want
from corral.engine import notes

CASES = Path(__file__).resolve().parents[1] / "operations"
FILES = sorted(CASES.glob("*/*.json"))
HOST = "node01"
SNAPSHOT_KEYS = {"files", "services", "packages", "blocks", "apt_lists_age_s", "container", "local_routes"}  # nodestate.Snapshot


def resolve(ref: str):
    module, _, name = ref.partition(":")
    obj = importlib.import_module(module)
    for part in name.split("."):
        obj = getattr(obj, part)
    return obj


def decode(value):
    """JSON -> Python, with three object forms:
    {"$type": "module:Class", **fields}: a pydantic model (validated) or a dataclass/class called with fields;
    {"$call": "module:function", "args": [...], "kwargs": {...}}: its result;
    {"$ref": "module:name"}: the object itself (e.g. a merge function);  {"$tuple": [...]}: a tuple;
    {"$lines": [...]}: a text, each line ended by a newline."""
    if isinstance(value, list):
        return [decode(v) for v in value]
    if not isinstance(value, dict):
        return value
    if "$type" in value:
        cls = resolve(value["$type"])
        fields = {k: decode(v) for k, v in value.items() if k != "$type"}
        return cls.model_validate(fields) if hasattr(cls, "model_validate") else cls(**fields)
    if "$call" in value:
        return resolve(value["$call"])(*decode(value.get("args", [])), **decode(value.get("kwargs", {})))
    if "$ref" in value:
        return resolve(value["$ref"])
    if "$tuple" in value:
        return tuple(decode(value["$tuple"]))
    if "$lines" in value:
        return text(value["$lines"])
    return {k: decode(v) for k, v in value.items()}


def text(value) -> str:
    """A text given as a string, or as its lines (each ended by a newline)."""
    return "".join(line + "\n" for line in value) if isinstance(value, list) else value


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def snapshot_of(data: dict) -> Snapshot:
    files = {}
    for path, f in data.get("files", {}).items():
        if f is not None:
            f = {"kind": "file", "mode": "644", "user": "root", "group": "root", **decode(f)}
            if "content" in f:
                f["sha256"] = sha256(text(f.pop("content")))
        files[path] = f
    blocks = {path: sha256(text(decode(b)["content"])) if isinstance(b, dict) else b
              for path, b in data.get("blocks", {}).items()}
    return Snapshot(files=files, services={k: tuple(v) for k, v in data.get("services", {}).items()},
                    packages=dict(data.get("packages", {})), blocks=blocks,
                    apt_lists_age_s=data.get("apt_lists_age_s"), container=data.get("container", "none"),
                    local_routes=dict(data.get("local_routes", {})))


class HostData(dict):
    """host.data: a mapping (host.data.get("ssh_user")) read by attribute too (host.data.corral_node)."""

    def __getattr__(self, key):
        try:
            return self[key]
        except KeyError:
            raise AttributeError(key) from None


class FakeHost:
    """What an operation sees of pyinfra's host while it generates its commands."""

    def __init__(self, case: dict) -> None:
        self.name, self.current_op_hash = HOST, "case"
        self.state = SimpleNamespace()   # nodestate caches its snapshot here (vars(host.state))
        self.data = HostData(decode(case.get("host_data", {})))
        self.noops: list[str] = []
        self.snapshot = snapshot_of(case.get("snapshot", {}))
        self.facts = case.get("facts", {})
        self.asked: dict[str, set] = {}   # fact -> the arguments it was asked with (a fact keyed by one)

    def noop(self, description: str) -> None:
        self.noops.append(description)

    def get_fact(self, fact, **kwargs):
        name = fact.__name__
        if name == "NodeState":
            return self.snapshot
        if name not in self.facts:
            raise AssertionError(f"the operation asked for fact {name}({kwargs}), which the case does not give")
        value = self.facts[name]
        self.asked.setdefault(name, set()).update(kwargs.values())
        if kwargs:
            (key,) = kwargs.values()  # one argument (FileContents: path): the fact's answers keyed by it
            if key not in value:
                raise AssertionError(f"the operation asked for fact {name}({kwargs}), which the case does not give")
            value = value[key]
        return decode(value)


def render(command) -> str:
    if isinstance(command, FileUploadCommand):
        staged = f" via {command.remote_temp_filename}" if command.remote_temp_filename else ""
        return f"upload {command.dest}{staged}"
    if isinstance(command, StringCommand):
        return command.get_raw_value()
    return str(command)


def upload_text(command: FileUploadCommand) -> str:
    src = command.src
    if isinstance(src, str):  # a file on the control host (made by a FunctionCommand before it): named, not read
        return f"(control host file {src})"
    data = src.getvalue() if hasattr(src, "getvalue") else Path(src).read_bytes()
    return data.decode(errors="replace")


def call(case: dict, fake: FakeHost) -> list:
    op = resolve(case["op"])
    func = getattr(op, "_inner", op)  # pyinfra 3 keeps the undecorated generator as `_inner`
    args = decode(case.get("args", {}))
    if "want" in inspect.signature(func).parameters:
        args["want"] = Want(**{k: tuple(v) for k, v in args.get("want", {}).items()})
    previous = ctx_host.get()
    try:
        with ctx_host.use(fake):
            return list(func(**args))
    finally:  # pyinfra's use() does not restore when the block raises (a case that expects an error)
        ctx_host.set(previous)


def expected_commands(expected: dict) -> list[str]:
    return ["\n".join(c) if isinstance(c, list) else c for c in expected.get("commands", [])]


def run_case(path: Path) -> dict:
    """The case's operation run: what `expected` of a case describes."""
    case = json.loads(path.read_text())
    fake = FakeHost(case)
    notes.take(HOST, "case")
    try:
        cmds = call(case, fake)
    finally:
        note = notes.take(HOST, "case")
    facts = case.get("facts", {})
    unused = [name for name in facts if name not in fake.asked] + [
        f"{name}({key})" for name, keys in fake.asked.items() if keys for key in facts[name] if key not in keys]
    return {"commands": [render(c) for c in cmds], "noop": "\n".join(fake.noops) or None,
            "disruption": note.get("disruption"), "diff": note.get("diff"),
            "uploads": {c.dest: upload_text(c) for c in cmds if isinstance(c, FileUploadCommand)},
            "unused_facts": unused}


def _block(title: str, want, got) -> str:
    if isinstance(want, str) and isinstance(got, str) and "\n" in want + got:
        body = "".join(difflib.unified_diff(want.splitlines(True), got.splitlines(True), "expected", "got"))
    else:
        body = f"  expected: {want!r}\n  got:      {got!r}\n"
    return f"--- {title} ---\n{body}"


def compare(expected: dict, got: dict) -> list[str]:
    problems = []
    want_cmds = expected_commands(expected)
    if want_cmds != got["commands"]:
        diff = "\n".join(difflib.unified_diff(want_cmds, got["commands"], "expected commands", "got commands",
                                              lineterm=""))
        problems.append(f"--- commands ---\n{diff}\n")
    for key in ("noop", "disruption"):
        if expected.get(key) != got[key]:
            problems.append(_block(key, expected.get(key), got[key]))
    if "diff" in expected and text(expected["diff"]) != got["diff"]:
        problems.append(_block("diff", text(expected["diff"]), got["diff"]))
    if got["unused_facts"]:
        problems.append(f"--- facts ---\n  given but never asked for (stale?): {', '.join(got['unused_facts'])}\n")
    for dest, want in expected.get("uploads", {}).items():
        if got["uploads"].get(dest) != text(want):
            problems.append(_block(f"upload {dest}", text(want), got["uploads"].get(dest)))
    return problems


@pytest.mark.parametrize("path", FILES, ids=[f"{p.parent.name}/{p.stem}" for p in FILES])
def test_operation_case(path: Path):
    case = json.loads(path.read_text())
    expected = case["expected"]
    rel = path.relative_to(CASES.parents[1]) if path.is_relative_to(CASES.parents[1]) else path
    if "error" in expected:
        err = resolve(expected["error"].get("type", "corral.errors:CorralError"))
        with pytest.raises(err, match=expected["error"]["match"]):
            run_case(path)
        return
    got = run_case(path)
    problems = compare(expected, got)
    if problems:
        pytest.fail(f"{rel}: the operation's result differs from the case\n" + "".join(problems), pytrace=False)


def test_every_case_names_an_operation_and_says_what_it_expects():
    assert FILES, f"no cases under {CASES}"
    keys = {"op", "args", "snapshot", "facts", "host_data", "expected", "description"}
    for path in FILES:
        case = json.loads(path.read_text())
        assert set(case) <= keys, f"{path}: unknown keys {set(case) - keys}"
        assert re.fullmatch(r"[\w.]+:\w+", case["op"]), path
        assert getattr(resolve(case["op"]), "_inner", None) is not None, f"{path}: {case['op']} is not an @operation"
        assert "error" in case["expected"] or {"commands", "noop", "disruption"} <= set(case["expected"]), path
        assert set(case.get("snapshot", {})) <= SNAPSHOT_KEYS, f"{path}: unknown snapshot keys"
