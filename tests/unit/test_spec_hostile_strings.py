"""Hostile strings in every string field of cluster.yaml.

Each string-typed leaf of the spec models (found by walking ClusterSpec.model_fields: nested models,
Optional, unions, list[...], dict keys and dict values) gets hostile values: shell payloads, line
injections, control characters, quotes, format placeholders, very long strings, random text. The
outcome is one of:

- a SpecError whose every problem is located at `cluster.yaml:LINE:COL` (line >= 1), or
- the spec is accepted, and then the value is harmless wherever it goes: it holds no line break or
  control character (but where it is parsed, not copied: IP addresses), and every file corral renders
  from the spec (render_all: slurm.conf, gres.conf, cgroup.conf, slurmdbd.conf, plugstack.conf,
  /etc/hosts blocks, prometheus.yml, alertmanager.yml, alert rules, Grafana files, health.json,
  jobhooks.json, mig-parted.json, enroot.conf, apt pins and sources, systemd units, ssh_config,
  sssd.conf) keeps the shape it has with the benign value (no new `Key=`, no line of a new kind, no
  extra word where a config splits on blanks, enroot.conf values no new shell syntax: enroot eval's
  them; sssd.conf the same sections and keys, no new '%', quote or backslash), and every
  generated shell script or command (pyxis, gpu-burn and nccl-tests builds, release .debs,
  cuda-keyring, sacctmgr, the node snapshot) has exactly the unquoted shell syntax and options it has with the benign value:
  the value stays one quoted word.

Each leaf is fuzzed on the smallest spec that sets it (minimal_base), cut from BASE, which sets every
optional section; a test checks that BASE reaches every string field the models declare.

A found hole that is not fixed yet is listed in KNOWN_UNSAFE: its fuzz case skips that class of
value and a strict xfail case documents it (and fails once the hole is closed, so it is removed).

Also: the spec string types of spec/types.py refuse every string holding shell or line syntax.
"""

from __future__ import annotations

import re
import typing
from dataclasses import dataclass
from functools import lru_cache

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from pydantic import TypeAdapter, ValidationError

from corral.errors import SpecError
from corral.render.hosts import BEGIN, END
from corral.spec import types as T
from corral.spec.loader import Locator, load_text, parse_yaml
from corral.spec.models import ClusterSpec

from tests.unit.hostile_spec import (  # noqa: F401
    BASE, BASE_VIRTUAL, LEAVES, PATH, SHA, schema_ids, to_yaml, with_value,
)
from tests.unit.hostile_checks import (  # noqa: F401
    CHECKS, _bad_chars, _benign, check_shell, outcome, render_all,
)

# --- hostile values --------------------------------------------------------------------------------

PAYLOADS = [  # tried on every field, as the whole value
    "a;touch /tmp/PWNED", "$(id)", "`id`", "${IFS}", "x\nPrologSlurmctld=/tmp/x.sh", "gpu03\n", "-rf",
    "../../etc/shadow", "a b", "'", '"', "\\", "\x00", "%s", "{version}", "http://evil/x",
    "https://x/a;touch${IFS}/tmp/PWNED;#", "x" * 5000,
]
# Added after (or before) the field's benign value, so that the value keeps a valid shape around the
# payload and gets past the type to the renderers
SUFFIXES = [";{touch,/tmp/PWNED}", " Key=v", "\n", "%n", "\x85"]
PREFIXES = ["~"]
MORE = [  # drawn at random, with random text
    "", " ", "\t", "\r", "\n", "\u2028", "\x1b[31m", ";id", "|id", "&id", "&&id", ">x", "<x", "(id)", "-",
    "\nKey=v", "*", "#x",
    "{touch,/tmp/PWNED}", "?", "!x", "%n", "~root", "$HOME/", " Key=value", "\\\nx", "<<", "null", "1e3",
    "y;" * 10_000, "\n" * 3, "\r\n", "\x7f", "\x9b", "\u2029", "\ufeff",
]
MODES = ("raw", "append", "prepend")
EXPLICIT = ([("raw", p) for p in PAYLOADS] + [("append", p) for p in SUFFIXES]
            + [("prepend", p) for p in PREFIXES])

hostile_text = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=40) | st.text(
    st.sampled_from(list("abz09-_./:@=,+%~{}[]$`;|&<>()*?!#'\"\\ \t\n\r\x00\x1b\x7f\x85\u2028")), max_size=30)
mutations = st.tuples(st.sampled_from(MODES),
                      st.sampled_from(PAYLOADS + SUFFIXES + PREFIXES + MORE) | hostile_text)


def apply(mutation: tuple[str, str], benign: str) -> str:
    mode, payload = mutation
    return {"raw": payload, "append": benign + payload, "prepend": payload + benign}[mode]


# --- holes found and not yet fixed: (leaf id, value) -> why it is unsafe ---------------------------

@dataclass(frozen=True)
class Known:
    leaf: str
    example: str                  # a value that shows the hole
    matches: typing.Callable[[str], bool]  # the class of values the fuzz case leaves to this entry
    reason: str


def _bad(value: str) -> bool:
    return bool(_bad_chars(value))


_ENROOT_SHELL = set(";&|<>(){}*?[]#~!")  # active in `eval echo VALUE` besides $ ` \ and quotes (refused)
_ENROOT_EVAL = ("enroot runs `eval echo VALUE` for every enroot.conf line (enroot.in config::init), in the "
                "shell of every user who runs enroot (pyxis: every container job): command injection")
_PACKAGE = re.compile(r"[a-z0-9][a-z0-9.+-]*")
# every hole the fuzz found is closed (enroot paths/settings through enroot's eval, MIG profiles with a
# trailing newline, unchecked mig_parted packages, ssh.key/state_dir blanks and ~user, pyxis arg keys in
# messages): a new one goes here as a strict xfail until it is fixed
KNOWN_UNSAFE: list[Known] = []


def _known(leaf_id: str, value: str) -> Known | None:
    return next((k for k in KNOWN_UNSAFE if k.leaf == leaf_id and k.matches(value)), None)


FUZZ = settings(max_examples=8, deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                       HealthCheck.filter_too_much])


def _with_explicit_examples(f):
    for m in EXPLICIT:
        f = example(mutation=m)(f)
    return f


@pytest.mark.parametrize("leaf", LEAVES, ids=[leaf.id for leaf in LEAVES])
@FUZZ
@_with_explicit_examples
@given(mutation=mutations)
def test_hostile_value(leaf, mutation):
    value = apply(mutation, leaf.benign)
    if _known(leaf.id, value):
        return  # documented in test_known_unsafe
    outcome(leaf, value)


@pytest.mark.parametrize("known", [
    pytest.param(k, id=f"{k.leaf}={k.example!r}", marks=pytest.mark.xfail(strict=True, reason=k.reason))
    for k in KNOWN_UNSAFE])
def test_known_unsafe(known):
    leaf = next(leaf for leaf in LEAVES if leaf.id == known.leaf)
    outcome(leaf, known.example)


# --- the base spec and the walk ----------------------------------------------------------------------

def test_base_specs_load_and_render():
    """The full base (every section) and each leaf's minimal base load, and render what the fuzz compares."""
    for base in (BASE, BASE_VIRTUAL):
        outputs = render_all(load_text(to_yaml(base), PATH))
        assert {"enroot.conf", "pyxis build script", "mig-parted.json #1", "dcgm-exporter unit",
                "sssd.conf"} <= set(outputs)
        for name, (kind, text) in outputs.items():
            CHECKS[kind](text, text, "")
    for text in {to_yaml(leaf.base) for leaf in LEAVES}:
        for name, (kind, rendered) in _benign(text).items():
            CHECKS[kind](rendered, rendered, "")


INJECTED = {  # format -> (benign rendering, the same with an injected value): each check must catch it
    "slurm": ("PartitionName=gpu Nodes=gpu01 State=UP\n",
              "PartitionName=gpu\nPrologSlurmctld=/x Nodes=gpu01 State=UP\n"),
    "yaml": ("a:\n  b: \"x\"\n", "a:\n  b: x\n  c: y\n"),
    "json": ('{"a": "x"}', '{"a": "x", "b": 1}'),
    "words": ("    IdentityFile /k/id\n", "    IdentityFile /k/i d\n"),
    "systemd": ("ExecStart=/usr/bin/x --dir /run/a\n", "ExecStart=/usr/bin/x --dir /run/a%n\n"),
    "hosts": (f"{BEGIN}\n10.0.0.1\tgpu01\n{END}\n", f"{BEGIN}\n10.0.0.1\tgpu01 evil\n{END}\n"),
    "enroot": ("ENROOT_DATA_PATH /d/user-$(id -u)\n", "ENROOT_DATA_PATH /d/x;id-$(id -u)\n"),
    "shell": ("curl -o \"$tmp/k\" 'https://a/b'\n", "curl -o \"$tmp/k\" https://a/b;id\n"),
    "exports": ("/srv/h 10.0.0.1(rw,sync)\n", "/srv/h 10.0.0.1(rw) *(rw,no_root_squash)\n"),
    "env": ("# c\nNCCL_DEBUG=WARN\n", "# c\nNCCL_DEBUG=WARN\nLD_PRELOAD=/x\n"),
    "paths": ("# c\n/etc/lmod/corral\n/sw/modulefiles\n", "# c\n/etc/lmod/corral\n/sw/x /etc\n"),
    "sssd": ("[domain/corral]\nldap_search_base = dc=x\n",
             "[domain/corral]\nldap_search_base = dc=x\nldap_tls_reqcert = never\n"),
}


@pytest.mark.parametrize("kind", sorted(CHECKS))
def test_checks_catch_an_injection(kind):
    benign, injected = INJECTED[kind]
    CHECKS[kind](benign, benign, "")
    with pytest.raises(AssertionError):
        CHECKS[kind](injected, benign, "x")
    if kind == "shell":  # an option where a value stood
        with pytest.raises(AssertionError):
            check_shell("curl -o \"$tmp/k\" -rf\n", "curl -o \"$tmp/k\" 'https://a/b'\n", "-rf")


def test_every_string_field_is_reached():
    """The base spec sets every string field the models declare (a new field needs a base value)."""
    declared = schema_ids(ClusterSpec)
    assert declared == {leaf.id for leaf in LEAVES}
    assert len(declared) >= 60


def test_each_leaf_is_checked_where_it_stands():
    """Not a vacuous fuzz: a NUL in each leaf is refused (but where KNOWN_UNSAFE says otherwise), and a
    problem points at the value's line (or at a key above it, where a validator checks the mapping)."""
    accepts_nul = {k.leaf for k in KNOWN_UNSAFE if k.matches("\x00")}
    for leaf in LEAVES:
        text = to_yaml(with_value(leaf, "\x00"))
        try:
            load_text(text, PATH)
        except SpecError as err:
            where = Locator(PATH, parse_yaml(text, PATH))
            path = leaf.path[:-1] + ("\x00",) if leaf.is_key else leaf.path
            lines = {where(path[:i]).split(":")[1] for i in range(1, len(path) + 1)}
            found = {p.where.split(":")[1] for p in err.problems}
            assert found & lines, (leaf.id, sorted(lines), [str(p) for p in err.problems])
        else:
            assert leaf.id in accepts_nul, f"{leaf.id} accepts a NUL"


# --- spec/types.py refuses shell and line syntax ------------------------------------------------------

WHITESPACE = [" ", "\t", "\n", "\r", "\x0b", "\x0c", "\x85", "\xa0", "\u2028", "\u3000"]
SHELL_BITS = ["'", '"', "`", "$", ";", "|", "&&", "\\"]
VALID = {  # the type, valid values to plant the bad piece in, what the type may hold of SHELL_BITS
    "Url": (T.Url, ["https://example.com/a/b.deb", "https://10.0.0.1:8443/x?y=1&z=2"], {"&&"}),
    "AbsPath": (T.AbsPath, ["/run/corral", "/var/lib/slurm"], set()),
    "SlurmDuration": (T.SlurmDuration, ["7-0", "12:00:00", "INFINITE", "90"], set()),
    "Hostname": (T.Hostname, ["gpu01", "smtp.example.com"], set()),
    "SlurmName": (T.SlurmName, ["normal", "gpu_long-1"], set()),
    "UnixUser": (T.UnixUser, ["corral", "_svc"], set()),
    "UserName": (T.UserName, ["jo.doe", "jo@corp"], set()),
    "UnitName": (T.UnitName, ["nvidia-persistenced", "getty@tty1.service"], {"\\"}),  # systemd's \x2d escapes
    "HostPort": (T.HostPort, ["smtp.example.com:587"], set()),
    "Email": (T.Email, ["oncall@example.com"], set()),
    "Sha256": (T.Sha256, [SHA], set()),
    "ConfigWord": (T.ConfigWord, ["/run/pyxis", "job"], set()),
}


@lru_cache(maxsize=None)
def _adapter(name: str) -> TypeAdapter:
    return TypeAdapter(VALID[name][0])


@pytest.mark.parametrize("name", sorted(VALID))
@settings(max_examples=60, deadline=None, database=None)
@given(data=st.data())
def test_types_refuse_shell_and_line_syntax(name, data):
    kind, valid, allowed = VALID[name]
    adapter = _adapter(name)
    base = data.draw(st.sampled_from(valid))
    bit = data.draw(st.sampled_from([b for b in WHITESPACE + SHELL_BITS if b not in allowed]))
    where = data.draw(st.integers(0, len(base)))
    value = base[:where] + bit + base[where:]
    for ok in valid:
        adapter.validate_python(ok)
    with pytest.raises(ValidationError):
        adapter.validate_python(value)


@settings(max_examples=200, deadline=None, database=None)
@given(st.text(max_size=40))
def test_types_accept_nothing_with_shell_syntax(text):
    """Whatever the text, a type that accepts it accepted no whitespace or shell syntax."""
    for name, (kind, _, allowed) in VALID.items():
        try:
            _adapter(name).validate_python(text)
        except ValidationError:
            continue
        bits = [b for b in WHITESPACE + SHELL_BITS if b not in allowed and b in text]
        assert not bits and not any(c.isspace() for c in text), f"{name} accepted {text!r}"


def test_config_value_refuses_line_syntax():
    adapter = TypeAdapter(T.ConfigValue)
    adapter.validate_python("-comp lz4 -noD")
    for bad in ["a\nb", "a\rb", "$(id)", "`id`", "'", '"', "\\", "\x00", "\x7f"]:
        with pytest.raises(ValidationError):
            adapter.validate_python(bad)
