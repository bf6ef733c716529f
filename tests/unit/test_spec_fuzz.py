"""Fuzzing the spec loader: whatever the input, the outcome is a Cluster or a located SpecError.

Never another exception, never a traceback in the message, always one line per problem.
"""

from __future__ import annotations

import copy
import io
import json
import re
from typing import Any

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from ruamel.yaml import YAML

from corral.errors import SpecError
from corral.spec.cluster import Cluster
from corral.spec.loader import load_text
from corral.spec.models import (QOS, Account, ClusterSpec, FairShare, GpuSpec, NodeGroup, NodeOverride,
                                Partition, SlurmSpec, SSHSpec, VirtualSpec)

PATH = "fuzz.yaml"
LOCATED = re.compile(r"^.+:\d+:\d+$")
FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def check(text: str) -> Cluster | SpecError:
    """Load `text`; assert the outcome honours the loader's contract."""
    try:
        return load_text(text, PATH)
    except SpecError as err:
        assert err.problems, "a SpecError without problems"
        for p in err.problems:
            assert p.where == PATH or LOCATED.match(p.where), p.where
            assert p.where.startswith(PATH)
            assert isinstance(p.message, str) and p.message
            assert "\n" not in str(p), str(p)
        message = str(err)
        assert "Traceback" not in message
        assert len(message.split("\n")) == len(err.problems)
        return err


# --- (a) random text ---------------------------------------------------------------------------

YAML_BITS = [
    "name: x\n", "nodes:\n", "  - ", "names: ", "addresses: ", "roles: ", "gpus: ", "overrides:\n",
    "slurm:\n", "partitions:\n", "qos:\n", "virtual:\n", "subnet: ", "scheduler: ", "kubernetes",
    "[", "]", "{", "}", ",", ":", ": ", "-", "- ", "? ", "&a ", "*a", "<<: ", "!!int ", "!!str ",
    "!!binary ", "!foo ", "|\n", ">\n", "'", '"', "#", "\t", "\n", "  ", "    ", "---\n", "...\n",
    "gpu[01-02]", "10.0.0.[11-12]", "10.0.0.11-12", "controller", "compute", "control-plane",
    "worker", "h100", "count: ", "-1", "4", "1e9", "0x1F", "true", "null", "~", "2024-13-01",
    "\x00", "\ufeff", "\u2028", "é", "\r\n", "%YAML 1.2\n", "%TAG ! tag:x,2000:\n", "\\", "@", "`",
]


@FUZZ
@given(st.text(max_size=300))
def test_random_text(text):
    check(text)


@FUZZ
@given(st.binary(max_size=300), st.sampled_from(["utf-8", "latin-1", "utf-16"]))
def test_random_bytes_decoded(data, encoding):
    check(data.decode(encoding, errors="replace"))


@FUZZ
@given(st.lists(st.sampled_from(YAML_BITS), max_size=60))
def test_random_yaml_fragments(bits):
    check("".join(bits))


@FUZZ
@given(st.lists(st.sampled_from(YAML_BITS), max_size=40), st.integers(0, 2000), st.text(max_size=10))
def test_valid_spec_with_fragments_spliced_in(bits, where, junk):
    text = VALID_TEXT
    where %= len(text) + 1
    check(text[:where] + "".join(bits) + junk + text[where:])


# --- (b) structured mutations of a valid spec --------------------------------------------------

VALID: dict[str, Any] = {
    "name": "lab",
    "scheduler": "slurm",
    "ssh": {"user": "root", "port": 22, "key": "id_ed25519"},
    "nodes": [
        {"names": "ctl1", "addresses": ["10.0.0.10"], "roles": ["controller", "accounting"],
         "memory_mb": 16384},
        {"names": "gpu[01-02]", "addresses": "10.0.0.[11-12]", "roles": ["compute"],
         "gpus": {"model": "h100", "count": 4, "memory_gib": 80, "nvlink": True},
         "overrides": {"gpu02": {"address": "10.0.0.99", "gpus": {"count": 2}, "memory_mb": 1024}}},
        {"names": "login1", "addresses": "10.0.0.20-20", "roles": ["login"]},
    ],
    "slurm": {
        "partitions": [{"name": "gpu", "nodes": "gpu[01-02]", "default": True, "max_time": "1-00:00:00",
                        "qos": "normal"},
                       {"name": "all"}],
        "qos": [{"name": "normal", "max_gpus_per_user": 8},
                {"name": "high", "priority": 10, "preempt": ["normal"], "preempt_mode": "requeue"}],
        "accounts": [{"name": "research", "qos": ["normal", "high"], "default_qos": "normal"},
                     {"name": "vision", "parent": "research", "users": ["alice"]}],
        "fairshare": {"enabled": True, "weight_age": 10},
    },
    "state_dir": ".corral",
}

MODELS = (ClusterSpec, SSHSpec, NodeGroup, NodeOverride, GpuSpec, SlurmSpec, Partition, QOS, Account,
          FairShare, VirtualSpec)
FIELD_NAMES = sorted({f for m in MODELS for f in m.model_fields})

scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.floats(),
    st.text(max_size=20),
    st.sampled_from(["gpu[01-02]", "gpu[01-03]", "gpu[", "10.0.0.[11-12]", "10.0.0.11-12", "10.0.0.256",
                     "fd00::1", "controller", "compute", "login", "worker", "control-plane", "nfs",
                     "h100", "ALL", "INFINITE", "normal", "high", "research", "", " ", "-1", "0",
                     "10.213.0.0/24", "10.0.0.1/33", "slurm", "kubernetes", "ctl1", "gpu01", "gpu02"]),
)
garbage = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4)
    | st.dictionaries(st.one_of(st.sampled_from(FIELD_NAMES), st.text(max_size=8)), inner, max_size=4),
    max_leaves=12,
)
keys = st.one_of(st.sampled_from(FIELD_NAMES), st.text(min_size=1, max_size=10))


def containers(node: Any, path: tuple = ()) -> list[tuple]:
    """Paths of every dict/list in the tree (the places a mutation can happen)."""
    found = []
    if isinstance(node, (dict, list)):
        found.append(path)
        items = node.items() if isinstance(node, dict) else enumerate(node)
        for k, v in items:
            found.extend(containers(v, path + (k,)))
    return found


def at(tree: Any, path: tuple) -> Any:
    for part in path:
        tree = tree[part]
    return tree


@st.composite
def mutated_specs(draw) -> Any:
    tree = copy.deepcopy(VALID)
    for _ in range(draw(st.integers(1, 4))):
        target = at(tree, draw(st.sampled_from(containers(tree))))
        slots = list(target) if isinstance(target, dict) else list(range(len(target)))
        op = draw(st.sampled_from(["delete", "add", "swap", "nest", "duplicate"]))
        if op == "add" or not slots:
            if isinstance(target, dict):
                target[draw(keys)] = draw(garbage)
            else:
                target.insert(draw(st.integers(0, len(target))), draw(garbage))
            continue
        slot = draw(st.sampled_from(slots))
        if op == "delete":
            del target[slot]
        elif op == "swap":          # a value of another type
            target[slot] = draw(scalars)
        elif op == "nest":          # the value buried in garbage
            target[slot] = draw(st.sampled_from([[target[slot]], {draw(keys): target[slot]}]))
            if draw(st.booleans()):
                target[slot] = draw(garbage)
        elif op == "duplicate" and isinstance(target, list):
            target.append(copy.deepcopy(target[slot]))
    return tree


def to_yaml(tree: Any, style: str) -> str:
    if style == "json":
        return json.dumps(tree, default=str)
    yaml = YAML(typ="safe", pure=True)
    yaml.default_flow_style = style == "flow"
    out = io.StringIO()
    yaml.dump(tree, out)
    return out.getvalue()


VALID_TEXT = to_yaml(VALID, "block")


def test_the_unmutated_spec_is_valid():
    for style in ("block", "flow", "json"):
        cluster = check(to_yaml(VALID, style))
        assert isinstance(cluster, Cluster), str(cluster)
        assert [n.name for n in cluster.nodes] == ["ctl1", "gpu01", "gpu02", "login1"]


@FUZZ
@given(mutated_specs(), st.sampled_from(["block", "flow", "json"]))
def test_mutated_specs(tree, style):
    outcome = check(to_yaml(tree, style))
    event("loaded" if isinstance(outcome, Cluster) else "SpecError")
    if isinstance(outcome, Cluster):
        # what loads is consistent: unique names and addresses, every node from a group
        names = [n.name for n in outcome.nodes]
        assert len(names) == len(set(names))
        assert len({n.address for n in outcome.nodes}) == len(names)
        assert all(0 <= n.group < len(outcome.spec.nodes) for n in outcome.nodes)


@settings(FUZZ, max_examples=100)
@given(mutated_specs())
def test_mutated_specs_with_text_damage(tree):
    text = to_yaml(tree, "block")
    lines = text.splitlines(keepends=True)
    # drop, duplicate or re-indent one line: the kinds of damage hand edits do
    i = len(lines) // 2
    check("".join(lines[:i] + lines[i + 1:]))
    check("".join(lines[:i] + [lines[i]] * 2 + lines[i + 1:]) if lines else "")
    check("".join(lines[:i] + [" " + ln for ln in lines[i:i + 1]] + lines[i + 1:]))


# --- valid specs of random shape ---------------------------------------------------------------


@st.composite
def valid_specs(draw) -> tuple[dict, list[str]]:
    n_groups = draw(st.integers(1, 4))
    groups, names, ip = [], [], 10
    for gi in range(n_groups):
        count = draw(st.integers(1, 12))
        width = draw(st.sampled_from([1, 2, 3]))
        lo = draw(st.integers(0, 50))
        hi = lo + count - 1
        prefix = f"g{gi}n"
        group_names = [f"{prefix}{i:0{width}d}" for i in range(lo, hi + 1)]
        form = draw(st.sampled_from(["list", "hostlist", "range"]))
        addrs = [f"10.0.{gi}.{ip + i}" for i in range(count)]
        addresses = {"list": addrs, "hostlist": f"10.0.{gi}.[{ip}-{ip + count - 1}]",
                     "range": f"10.0.{gi}.{ip}-{ip + count - 1}"}[form]
        group: dict[str, Any] = {"names": f"{prefix}[{lo:0{width}d}-{hi:0{width}d}]",
                                 "addresses": addresses, "roles": ["compute"]}
        if draw(st.booleans()):
            group["gpus"] = {"model": draw(st.sampled_from(["h100", "a100", "l40s"])),
                             "count": draw(st.integers(0, 8))}
        if draw(st.booleans()):
            victim = draw(st.sampled_from(group_names))
            group["overrides"] = {victim: {"memory_mb": draw(st.integers(64, 10**6))}}
        groups.append(group)
        names.extend(group_names)
    # the controller role on the first node only, by override
    groups[0].setdefault("overrides", {}).setdefault(names[0], {})["roles"] = ["controller", "compute"]
    return {"name": "rand", "nodes": groups}, names


@FUZZ
@given(valid_specs(), st.sampled_from(["block", "flow", "json"]))
def test_random_valid_specs_load(spec_and_names, style):
    tree, names = spec_and_names
    cluster = check(to_yaml(tree, style))
    assert isinstance(cluster, Cluster), str(cluster)
    assert [n.name for n in cluster.nodes] == names
    assert [n.name for n in cluster.with_role("controller")] == [names[0]]
