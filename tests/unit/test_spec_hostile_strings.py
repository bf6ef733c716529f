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
  jobhooks.json, mig-parted.json, enroot.conf, apt pins and sources, systemd units, ssh_config) keeps
  the shape it has with the benign value (no new `Key=`, no line of a new kind, no extra word where a
  config splits on blanks, enroot.conf values no new shell syntax: enroot eval's them), and every
  generated shell script or command (pyxis build, release .debs, cuda-keyring, versionlock, sacctmgr,
  the node snapshot) has exactly the unquoted shell syntax and options it has with the benign value:
  the value stays one quoted word.

Each leaf is fuzzed on the smallest spec that sets it (minimal_base), cut from BASE, which sets every
optional section; a test checks that BASE reaches every string field the models declare.

A found hole that is not fixed yet is listed in KNOWN_UNSAFE: its fuzz case skips that class of
value and a strict xfail case documents it (and fails once the hole is closed, so it is removed).

Also: the spec string types of spec/types.py refuse every string holding shell or line syntax.
"""

from __future__ import annotations

import copy
import ipaddress
import json
import re
import shlex
import types
import typing
import unicodedata
from collections import Counter
from dataclasses import dataclass
from functools import lru_cache
from typing import Annotated, Any, Literal

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, TypeAdapter, ValidationError
from ruamel.yaml import YAML

from corral.deploy import dcgm as dcgm_deploy
from corral.deploy import dcgm_exporter as dcgm_exporter_deploy
from corral.deploy import health as health_deploy
from corral.deploy import jobhooks as jobhooks_deploy
from corral.deploy import nvidia_tools
from corral.deploy.monitoring import node_exporter_args
from corral.deploy.nodestate import NodeState
from corral.deploy.nvidia_driver import lock_restore_script
from corral.deploy.nvidia_repo import KEYRING_DEB, keyring_script
from corral.deploy.sacct_sync import AcctState, plan_sync
from corral.deploy.slurm import dropin
from corral.engine.inventory import ssh_config_text
from corral.errors import SpecError
from corral.render import render_cgroup_conf, render_gres_conf, render_slurm_conf, render_slurmdbd_conf
from corral.render.alertmanager import render_alertmanager_yml
from corral.render.alerts import render_rules
from corral.render.containers import enroot_conf, plugstack_conf, pyxis_build_script
from corral.render.debs import release_debs_script
from corral.render.grafana import render_datasource, render_ini
from corral.render.hosts import BEGIN, END, render_hosts_block
from corral.render.mig import mig_parted_config
from corral.render.nvidia import driver_package, pin_text, versionlock_block
from corral.render.prometheus import listen_address, render_prometheus_yml
from corral.spec import types as T
from corral.spec.cluster import Cluster
from corral.spec.containers import PLACEHOLDERS
from corral.spec.loader import Locator, load_text, parse_yaml
from corral.spec.models import ClusterSpec

PATH = "cluster.yaml"
LOCATED = re.compile(r"^cluster\.yaml:(\d+):(\d+)$")
SHA = "0123456789abcdef" * 4

# --- the base spec: every optional section set, so that every string field is reachable ----------

BASE: dict[str, Any] = {
    "name": "lab",
    "scheduler": "slurm",
    "ssh": {"user": "corral", "key": "keys/id_ed25519", "port": 22, "jump_host": "admin@bastion.example.com:2222"},
    "nodes": [  # the first occurrence of a field is the one fuzzed: unreferenced names come first
        {"names": "login1", "addresses": "10.213.0.20", "roles": ["login"]},
        {"names": "gpu[01-02]", "addresses": ["10.213.0.11", "10.213.0.12"], "roles": ["compute"],
         "memory_mb": 515000,
         "gpus": {"model": "h100", "count": 4, "memory_gib": 80, "nvlink": True,
                  "mig": [{"gpus": "0-1", "profiles": ["3g.40gb", "3g.40gb"]}]},
         "overrides": {"gpu02": {"address": "10.213.0.99", "roles": ["compute"], "memory_mb": 256000,
                                 "gpus": {"model": "h100", "count": 4, "memory_gib": 80,
                                          "mig": [{"gpus": "all", "profiles": ["7g.80gb"]}]}}}},
        {"names": "ctl1", "addresses": ["10.213.0.10"], "roles": ["controller", "accounting", "monitoring"],
         "memory_mb": 16384},
    ],
    "slurm": {
        "partitions": [{"name": "gpu", "nodes": "gpu[01-02]", "default": True, "max_time": "2-00:00:00",
                        "qos": "normal", "extra": {"AllowAccounts": "research"}},
                       {"name": "all"}],
        "qos": [{"name": "high", "priority": 100, "max_wall": "4:00:00", "preempt": ["normal"],
                 "preempt_mode": "requeue"},
                {"name": "normal", "max_gpus_per_user": 8, "max_wall": "12:00:00"}],
        "accounts": [{"name": "vision", "parent": "research", "users": ["alice", "jo.doe"], "qos": ["normal"],
                      "default_qos": "normal"},
                     {"name": "research", "fairshare": 10, "qos": ["normal", "high"], "default_qos": "normal"}],
        "fairshare": {"decay_half_life": "7-0"},
        "extra": {"SchedulerParameters": "bf_continue"},
    },
    "health": {"mounts": ["/", "/scratch"], "services": ["nvidia-persistenced"],
               "min_free_mb": {"/tmp": 256, "/var/lib/slurm": 256}},
    "monitoring": {
        "gpu_job_map_dir": "/run/corral/gpu-jobs",
        "alerts": {"receivers": [{"name": "ops", "webhook": "https://hooks.example.com/alert?team=gpu&x=1"},
                                 {"name": "mail", "email": "oncall@example.com", "severities": ["critical"]}],
                   "smtp": {"smarthost": "smtp.example.com:587", "sender": "corral@example.com"}},
        "grafana": {"repo_url": "https://apt.grafana.com", "key_url": "https://apt.grafana.com/gpg.key",
                    "version": "10.4.2"},
        "dcgm_exporter": {"package": "datacenter-gpu-manager-exporter", "version": "4.1.1-1",
                          "binary": "/usr/bin/dcgm-exporter",
                          "repo_url": "https://developer.download.nvidia.com/compute/cuda/repos"},
    },
    "nvidia": {
        "driver": {"version": "550.127.05", "package": "nvidia-driver-550-server",
                   "repo_url": "https://developer.download.nvidia.com/compute/cuda/repos"},
        "dcgm": {"package": "datacenter-gpu-manager-4-cuda12", "version": "1:4.1.1-1"},
        "cuda_toolkit": {"version": "12.4"},
        "container_toolkit": {"engine": "docker", "version": "1.16.2-1",
                              "repo_url": "https://nvidia.github.io/libnvidia-container"},
        "enroot": {"version": "3.5.0", "packages": ["enroot", "enroot+caps"],
                   "url": "https://github.com/NVIDIA/enroot/releases/download/v{version}/"
                          "{package}_{version}-1_{arch}.deb",
                   "sha256": {"enroot": SHA, "enroot+caps": SHA},
                   "runtime_path": "/run/enroot/user-$(id -u)",
                   "cache_path": "/var/lib/enroot/cache/group-$(id -g)",
                   "data_path": "/tmp/enroot-data/user-$(id -u)",
                   "settings": {"ENROOT_SQUASH_OPTIONS": "-comp lz4 -noD"}},
        "pyxis": {"version": "0.20.0", "url": "https://github.com/NVIDIA/pyxis/archive/refs/tags/v{version}.tar.gz",
                  "sha256": SHA, "args": {"runtime_path": "/run/pyxis", "container_scope": "job"}},
        "mig_parted": {"version": "0.12.2", "packages": ["nvidia-mig-manager"],
                       "url": "https://github.com/NVIDIA/mig-parted/releases/download/v{version}/"
                              "{package}_{version}-1_{arch}.deb",
                       "sha256": {"nvidia-mig-manager": SHA}},
    },
    "state_dir": ".corral",
}
BASE_VIRTUAL: dict[str, Any] = {**BASE, "virtual": {"bridge": "corral0", "subnet": "10.213.0.0/24"}}
# Nodes for a leaf outside `nodes`: a controller and two GPU nodes, no MIG (that would ask for mig_parted's sums)
MIN_NODES = [{"names": "ctl1", "addresses": "10.213.0.10",
              "roles": ["controller", "accounting", "monitoring", "login"]},
             {"names": "gpu[01-02]", "addresses": "10.213.0.[11-12]", "roles": ["compute"],
              "gpus": {"model": "h100", "count": 4}}]
# A leaf whose values would otherwise always fail a cross-check before reaching a renderer
TWEAKS: dict[str, dict[tuple, Any]] = {
    "nvidia.enroot.packages[]": {("nvidia", "enroot", "sha256"): "skip"},      # else: no sha256 for <value>
    "nvidia.mig_parted.packages[]": {("nvidia", "mig_parted", "sha256"): "skip"},
}


NEEDS = {("slurm", "partitions"): ("qos",), ("slurm", "accounts"): ("qos",), ("nvidia", "pyxis"): ("enroot",)}


@lru_cache(maxsize=None)
def _minimal_base(leaf_id: str, path: tuple) -> str:
    full = BASE_VIRTUAL if path[0] == "virtual" else BASE
    doc: dict[str, Any] = {"name": full["name"], "nodes": MIN_NODES}
    top = path[0]
    if top == "nodes":  # the leaf's group as it is, the others cut to their names, addresses and roles
        doc["nodes"] = [g if j == path[1] else {k: g[k] for k in ("names", "addresses", "roles")}
                        for j, g in enumerate(full["nodes"])]
        doc["nvidia"] = {"mig_parted": full["nvidia"]["mig_parted"]}
    elif top != "name" and len(path) > 1 and isinstance(full[top], dict):
        keep = {path[1], *NEEDS.get(path[:2], ())}
        doc[top] = {k: v for k, v in full[top].items() if k in keep}
    elif top != "name":
        doc[top] = full[top]
    doc = copy.deepcopy(doc)
    for where, value in TWEAKS.get(leaf_id, {}).items():
        node = doc
        for part in where[:-1]:
            node = node[part]
        node[where[-1]] = value
    return json.dumps(doc)


def minimal_base(leaf_id: str, path: tuple) -> dict[str, Any]:
    """The smallest valid spec that sets the leaf: the required keys and the part of the section that
    holds it (with what it refers to: pyxis needs enroot, partitions and accounts name QOS, a MIG layout
    needs mig_parted's sums; other node groups cut down); a fresh copy."""
    return json.loads(_minimal_base(leaf_id, path))


# --- YAML text with every string double-quoted ---------------------------------------------------

def _char(c: str) -> str:
    if c in '"\\':
        return "\\" + c
    if " " <= c <= "~":
        return c
    # YAML, unlike JSON, reads \ud83d\ude00 as two lone surrogates: a character beyond U+FFFF is \U........
    return f"\\u{ord(c):04x}" if ord(c) < 0x10000 else f"\\U{ord(c):08x}"


def _scalar(value: Any) -> str:
    """A YAML double-quoted scalar holding exactly `value` (printable ASCII, everything else escaped)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, (int, float)):
        return str(value)
    return '"' + "".join(map(_char, str(value))) + '"'


def to_yaml(value: Any, indent: int = 0) -> str:
    pad = " " * indent
    if isinstance(value, dict):
        if not value:
            return pad + "{}\n"
        out = []
        for k, v in value.items():
            if isinstance(v, (dict, list)) and v:
                out.append(f"{pad}{_scalar(k)}:\n{to_yaml(v, indent + 2)}")
            else:
                out.append(f"{pad}{_scalar(k)}: {to_yaml(v).strip() if isinstance(v, (dict, list)) else _scalar(v)}\n")
        return "".join(out)
    if isinstance(value, list):
        if not value:
            return pad + "[]\n"
        out = []
        for v in value:
            if isinstance(v, (dict, list)) and v:
                out.append(f"{pad}-\n{to_yaml(v, indent + 2)}")
            else:
                out.append(f"{pad}- {to_yaml(v).strip() if isinstance(v, (dict, list)) else _scalar(v)}\n")
        return "".join(out)
    return pad + _scalar(value) + "\n"


# --- the string leaves of the spec models ----------------------------------------------------------

PARSED_FROM_STR = (ipaddress.IPv4Address, ipaddress.IPv6Address, ipaddress.IPv4Network)


def _unwrap(ann: Any) -> Any:
    while typing.get_origin(ann) is Annotated:
        ann = typing.get_args(ann)[0]
    return ann


def _members(ann: Any) -> list[Any]:
    ann = _unwrap(ann)
    if typing.get_origin(ann) in (typing.Union, types.UnionType):
        return [m for arg in typing.get_args(ann) for m in _members(arg)]
    return [ann]


def _is_model(ann: Any) -> bool:
    return isinstance(ann, type) and issubclass(ann, BaseModel)


def _is_string(ann: Any) -> bool:
    return ann is str or ann in PARSED_FROM_STR


def schema_ids(ann: Any, sid: str = "") -> set[str]:
    """Every string leaf the models declare: `a.b`, `a[]` (list items), `a{key}` / `a{}` (dict keys / values)."""
    out: set[str] = set()
    for m in _members(ann):
        origin = typing.get_origin(m)
        if m is type(None) or origin is Literal or m in (int, float, bool):
            continue
        if _is_string(m):
            out.add(sid)
        elif _is_model(m):
            for name, f in m.model_fields.items():
                out |= schema_ids(f.annotation, f"{sid}.{name}" if sid else name)
        elif origin is list:
            out |= schema_ids(typing.get_args(m)[0], sid + "[]")
        elif origin is dict:
            key, val = typing.get_args(m)
            if any(_is_string(k) for k in _members(key)):
                out.add(sid + "{key}")
            out |= schema_ids(val, sid + "{}")
        else:  # a new kind of annotation: teach this walk about it
            raise TypeError(f"{sid}: unhandled annotation {m!r}")
    return out


@dataclass(frozen=True)
class Leaf:
    id: str          # schema path, e.g. nodes[].gpus.mig[].profiles[]
    path: tuple      # where in the base document
    is_key: bool     # a dict key (renamed) rather than a value
    benign: str      # the base's value there

    @property
    def base(self) -> dict[str, Any]:
        return minimal_base(self.id, self.path)


def _walk(ann: Any, data: Any, path: tuple, sid: str, out: dict[str, Leaf]) -> None:
    for m in _members(ann):
        origin = typing.get_origin(m)
        if _is_string(m):
            if isinstance(data, str) and sid not in out:
                out[sid] = Leaf(sid, path, False, data)
        elif _is_model(m) and isinstance(data, dict):
            for name, f in m.model_fields.items():
                if name in data:
                    _walk(f.annotation, data[name], path + (name,), f"{sid}.{name}" if sid else name, out)
        elif origin is list and isinstance(data, list):
            for i, item in enumerate(data):
                _walk(typing.get_args(m)[0], item, path + (i,), sid + "[]", out)
        elif origin is dict and isinstance(data, dict):
            key, val = typing.get_args(m)
            for k, item in data.items():
                if any(_is_string(x) for x in _members(key)) and sid + "{key}" not in out:
                    out[sid + "{key}"] = Leaf(sid + "{key}", path + (k,), True, k)
                _walk(val, item, path + (k,), sid + "{}", out)


def _leaves() -> list[Leaf]:
    found: dict[str, Leaf] = {}
    _walk(ClusterSpec, BASE_VIRTUAL, (), "", found)
    return sorted(found.values(), key=lambda leaf: leaf.id)


LEAVES = _leaves()


def with_value(leaf: Leaf, value: str) -> dict:
    data = leaf.base
    node = data
    for part in leaf.path[:-1]:
        node = node[part]
    last = leaf.path[-1]
    if leaf.is_key:
        items = list(node.items())
        node.clear()
        for k, v in items:
            node[value if k == last else k] = v
    else:
        node[last] = value
    return data


# --- everything rendered from a cluster ------------------------------------------------------------

CUDA_PATH = "ubuntu2204/x86_64"


def render_all(cluster: Cluster) -> dict[str, tuple[str, str]]:
    """name -> (format, text) of every config file and script corral renders from the spec."""
    nv, mon = cluster.spec.nvidia, cluster.spec.monitoring
    out: dict[str, tuple[str, str]] = {
        "slurm.conf": ("slurm", render_slurm_conf(cluster, {})),
        "gres.conf": ("slurm", render_gres_conf(cluster)),
        "cgroup.conf": ("slurm", render_cgroup_conf(cluster)),
        "plugstack.conf": ("slurm", plugstack_conf(nv.pyxis)),
        "prometheus.yml": ("yaml", render_prometheus_yml(cluster)),
        "alertmanager.yml": ("yaml", render_alertmanager_yml(cluster)),
        "corral.rules.yml": ("yaml", render_rules(cluster)),
        "jobhooks.json": ("json", jobhooks_deploy.config(cluster)),
        "ssh_config": ("words", ssh_config_text(cluster, list(cluster.nodes))),
        "sacctmgr commands": ("shell", "\n".join(plan_sync(cluster, AcctState()).commands) + "\n"),
        "dcgm pin": ("words", dcgm_deploy.pin(nv.dcgm.package, nv.dcgm.version)),
        "dcgm-exporter pin": ("words", dcgm_exporter_deploy.pin(mon.dcgm_exporter.package, mon.dcgm_exporter.version)),
        "dcgm-exporter keyring script": ("shell", keyring_script(
            f"{mon.dcgm_exporter.repo_url.rstrip('/')}/{CUDA_PATH}/{KEYRING_DEB}")),
    }
    if cluster.with_role("accounting"):
        out["slurmdbd.conf"] = ("slurm", render_slurmdbd_conf(cluster, db_password="db-password"))
    for server in cluster.with_role("monitoring")[:1]:
        out["grafana datasource"] = ("yaml", render_datasource(cluster))
        out["grafana.ini"] = ("words", render_ini(cluster, server.address, "admin-password"))
        out["dcgm-exporter unit"] = ("systemd", dcgm_exporter_deploy.unit(
            mon.dcgm_exporter.binary, listen_address(cluster, server.address, mon.dcgm_exporter.port),
            mon.gpu_job_map_dir))
    for i, n in enumerate(cluster.nodes):  # by index: a node's name is a value under test
        out[f"hosts block #{i}"] = ("hosts", render_hosts_block(cluster, n))
        out[f"node-exporter args #{i}"] = ("words", node_exporter_args(cluster, n))
        if "compute" in n.roles:
            out[f"health.json #{i}"] = ("json", health_deploy.config(cluster, n))
            out[f"slurmd drop-in #{i}"] = ("systemd", dropin(cluster, n))
        if n.gpus is not None and n.gpus.mig is not None:
            out[f"mig-parted.json #{i}"] = ("json", mig_parted_config(n.gpus))
        if n.gpus is not None and "compute" in n.roles and nv.driver is not None:
            package = nv.driver.package or driver_package(nv.driver, n, "ubuntu", "22.04")
            out[f"driver pin #{i}"] = ("words", pin_text(package, nv.driver.version, nv.driver.package is not None))
    if nv.driver is not None:
        out["driver versionlock"] = ("words", versionlock_block(nv.driver.version))
        out["driver versionlock script"] = ("shell", lock_restore_script(nv.driver.version))
        out["driver keyring script"] = ("shell", keyring_script(
            f"{nv.driver.repo_url.rstrip('/')}/{CUDA_PATH}/{KEYRING_DEB}"))
    if nv.container_toolkit is not None:
        out["container toolkit source"] = ("words", nvidia_tools.ctk_source(nv.container_toolkit.repo_url))
        out["container toolkit pin"] = ("words", nvidia_tools.ctk_pin(nv.container_toolkit.version))
    if nv.enroot is not None:
        e = nv.enroot
        out["enroot.conf"] = ("enroot", enroot_conf(e))
        out["enroot install script"] = ("shell", release_debs_script(
            "enroot", "nvidia.enroot.sha256", e.packages, e.version, e.url, e.sha256))
    if nv.pyxis is not None:
        out["pyxis build script"] = ("shell", pyxis_build_script(nv.pyxis))
    m = nv.mig_parted
    out["mig-parted install script"] = ("shell", release_debs_script(
        "mig-parted", "nvidia.mig_parted.sha256", m.packages, m.version, m.url, m.sha256))
    packages = [*(nv.enroot.packages if nv.enroot else []), *m.packages, nv.dcgm.package, mon.dcgm_exporter.package]
    packages += [nvidia_tools.cuda_package(nv.cuda_toolkit.version)] if nv.cuda_toolkit else []
    packages += [nv.driver.package] if nv.driver and nv.driver.package else []
    out["node snapshot command"] = ("shell", NodeState().command(packages=tuple(packages)))
    return out


@lru_cache(maxsize=None)
def _benign(text: str) -> dict[str, tuple[str, str]]:
    return render_all(load_text(text, PATH))


def benign_outputs(leaf: Leaf) -> dict[str, tuple[str, str]]:
    return _benign(to_yaml(leaf.base))


# --- what "safe" means, per format ------------------------------------------------------------------

SHELL_ACTIVE = set(" \t\n;&|<>()$`*?[]{}#~!")


def shell_active(script: str, chars: set[str] = SHELL_ACTIVE) -> Counter:
    """The shell syntax characters of `script` outside quotes (and $ ` \\ inside double quotes)."""
    out: Counter = Counter()
    state, i = "", 0
    while i < len(script):
        c = script[i]
        if state == "'":
            state = "" if c == "'" else state
        elif state == '"':
            if c == "\\":
                out["\\"] += 1
                i += 1
            elif c == '"':
                state = ""
            elif c in "$`":
                out[c] += 1
        elif c == "\\":
            out["\\"] += 1
            i += 1
        elif c in "'\"":
            state = c
        elif c in chars:
            out[c] += 1
        i += 1
    if state:
        out["unterminated " + state] += 1
    return out


def _line_shapes(text: str, comment: str = "#") -> set[tuple]:
    """(first key, number of words) of each line: a line of a new kind or with an extra word shows."""
    shapes = set()
    for line in text.split("\n"):
        body = line.split(comment, 1)[0] if comment else line
        words = body.split()
        if words:
            shapes.add((re.split(r"[=:]", words[0], maxsplit=1)[0], len(words)))
    return shapes


def check_slurm(text: str, benign: str, value: str) -> None:
    """Slurm's parser: '#' starts a comment, words are `Key=value`: no line may have keys (or a word
    count) that no line of the benign rendering has."""
    def shapes(t: str) -> set[tuple]:  # (first key, Key=value words, words); a key may be a value (pyxis args)
        out = set()
        for line in t.split("\n"):
            words = line.split("#", 1)[0].split()
            if words:
                out.add((words[0].split("=", 1)[0] if "=" in words[0] else words[0],
                         sum("=" in w for w in words), len(words)))
        return out
    new = shapes(text) - shapes(benign)
    assert not new, f"lines of a new shape: {sorted(new)}"


def _structure(obj: Any, prefix: tuple = ()) -> set[tuple]:
    if isinstance(obj, dict):
        out = {prefix}
        for k, v in obj.items():
            out |= _structure(v, prefix + (str(k),))
        return out
    if isinstance(obj, list):
        out = {prefix}
        for v in obj:
            out |= _structure(v, prefix + ("[]",))
        return out
    return {prefix + (type(obj).__name__,)}


_SAFE_YAML = YAML(typ="safe", pure=True)


@lru_cache(maxsize=64)
def _yaml_structure(text: str) -> frozenset:
    return frozenset(_structure(_SAFE_YAML.load(text)))


def check_yaml(text: str, benign: str, value: str) -> None:
    new = _yaml_structure(text) - _yaml_structure(benign)
    assert not new, f"YAML structure the benign rendering does not have: {sorted(new)[:5]}"


def check_json(text: str, benign: str, value: str) -> None:
    data, base = json.loads(text), json.loads(benign)
    assert set(data) == set(base), "JSON top-level keys changed"


def check_words(text: str, benign: str, value: str) -> None:
    """Whitespace-split config lines (apt, ssh_config, ini, defaults files): same kinds of lines,
    each with the same number of words."""
    new = _line_shapes(text) - _line_shapes(benign)
    assert not new, f"lines of a new shape: {sorted(new)}"


def check_systemd(text: str, benign: str, value: str) -> None:
    check_words(text, benign, value)
    for c in "%$;\\":  # specifiers, environment expansion, command separators, escapes
        assert text.count(c) == benign.count(c), f"systemd unit gains {c!r}"


def check_hosts(text: str, benign: str, value: str) -> None:
    lines = text.split("\n")
    assert lines[0] == BEGIN and lines[-2] == END and lines[-1] == ""
    assert len(lines) == len(benign.split("\n"))
    for line in lines[1:-2]:
        address, name = line.split("\t")
        ipaddress.ip_address(address)
        assert len(line.split()) == 2, line


ENROOT_KEY = re.compile(r"ENROOT_[A-Z0-9_]+")


def check_enroot(text: str, benign: str, value: str) -> None:
    """enroot reads each line as `key value` and runs `eval echo value` in the user's shell: besides
    the $(id -u) / $(id -g) placeholders, no value may carry shell syntax the benign rendering lacks."""
    def parse(t: str) -> tuple[list[str], Counter]:
        keys, active = [], Counter()
        for line in t.split("\n"):
            if line and not line.startswith("#"):
                key, rest = re.fullmatch(r"([^ \t=]*)[ \t=]*(.*)", line).groups()  # read -r key value
                keys.append(key)
                for placeholder in PLACEHOLDERS:
                    rest = rest.replace(placeholder, "")
                active += shell_active(rest, SHELL_ACTIVE - {" ", "\t"})
        return keys, active
    keys, active = parse(text)
    bkeys, bactive = parse(benign)
    assert len(keys) == len(bkeys) and all(ENROOT_KEY.fullmatch(k) for k in keys), keys
    assert active == bactive, f"enroot.conf values gain shell syntax: {active - bactive}"


def check_shell(text: str, benign: str, value: str) -> None:
    """The script's unquoted shell syntax is the benign script's: the value stayed inside quotes."""
    strip = '"$arch"'  # url_script's own construct: one per {arch} in a URL template
    active, bactive = shell_active(text.replace(strip, "")), shell_active(benign.replace(strip, ""))
    assert active == bactive, f"unquoted shell syntax differs: +{active - bactive} -{bactive - active}"
    tokens = shlex.split(text, comments=False)
    if len(value) > 1 and text.count(value) > benign.count(value):
        assert any(value in t for t in tokens), "the value is split over several words"
    options = {t for t in tokens if t.startswith("-")} - {t for t in shlex.split(benign) if t.startswith("-")}
    assert not options, f"new option-like words: {sorted(options)[:5]}"


CHECKS = {"slurm": check_slurm, "yaml": check_yaml, "json": check_json, "words": check_words,
          "systemd": check_systemd, "hosts": check_hosts, "enroot": check_enroot, "shell": check_shell}

LINE_BREAKS = set("\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029")  # str.splitlines() splits at each
# Parsed, not copied: spec/hosts.py strips the blanks around an address and writes it back as ipaddress
# formats it (" 10.0.0.1\n" is accepted; the rendered files have 10.0.0.1)
NORMALIZED = {"nodes[].addresses", "nodes[].addresses[]"}


def _bad_chars(text: str, newline: bool = True) -> Counter:
    """Line breaks (as str.splitlines() sees them) and control characters in `text`."""
    return Counter(c for c in text
                   if (c in LINE_BREAKS or unicodedata.category(c) == "Cc") and (newline or c != "\n"))


def outcome(leaf: Leaf, value: str) -> None:
    """Load the base spec with `value` at `leaf`; assert a located error or a harmless value."""
    text = to_yaml(with_value(leaf, value))
    try:
        cluster = load_text(text, PATH)
    except SpecError as err:
        assert err.problems, "a SpecError without problems"
        for p in err.problems:
            m = LOCATED.match(p.where)
            assert m and int(m.group(1)) >= 1 and int(m.group(2)) >= 1, f"not located: {p.where!r} ({p.message})"
            assert "\n" not in str(p), str(p)
        return
    bad = sorted(_bad_chars(value))
    assert leaf.id in NORMALIZED or not bad, f"{leaf.id}: accepted a value with line breaks or controls {bad!r}"
    benign = benign_outputs(leaf)
    outputs = render_all(cluster)
    assert set(outputs) == set(benign), f"rendered files differ: {set(outputs) ^ set(benign)}"
    for name, (kind, rendered) in outputs.items():
        if rendered == benign[name][1]:
            continue
        try:  # a line more or less is the shape checks' business (a GPU model of its own: a gres.conf line)
            assert _bad_chars(rendered, False) == _bad_chars(benign[name][1], False), "line breaks or controls"
            CHECKS[kind](rendered, benign[name][1], value)
        except AssertionError as exc:
            raise AssertionError(f"{leaf.id} = {value!r} reaches {name} unsafely: {exc}") from None


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
        assert {"enroot.conf", "pyxis build script", "mig-parted.json #1", "dcgm-exporter unit"} <= set(outputs)
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
