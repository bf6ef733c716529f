"""Hostile-strings fuzz, part 1: the base spec that sets every optional section, its YAML writer, and
the walk over the spec models that finds every string leaf (tests/unit/test_spec_hostile_strings.py)."""

from __future__ import annotations

import copy
import ipaddress
import json
import os
import re
import tempfile
import types
import typing
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel

from corral.spec.models import ClusterSpec


PATH = "cluster.yaml"
LOCATED = re.compile(r"^cluster\.yaml:(\d+):(\d+)$")
SHA = "0123456789abcdef" * 4
# identity.ldap's files must exist (spec/rules_ldap.py): absolute, so the spec loads from any directory
LDAP_FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "ldap"
LDAP_CA, LDAP_BIND = str(LDAP_FIXTURES / "ca.pem"), str(LDAP_FIXTURES / "bind-password")
# workbench.jupyterhub.tls: the site's files must exist and the key be 0600 (spec/rules_workbench.py): made here
_HUB_TLS = Path(tempfile.mkdtemp(prefix="corral-hostile-hub-"))
HUB_CERT, HUB_KEY = str(_HUB_TLS / "hub.pem"), str(_HUB_TLS / "hub.key")
Path(HUB_CERT).write_text("-----BEGIN CERTIFICATE-----\n-----END CERTIFICATE-----\n")
os.close(os.open(HUB_KEY, os.O_WRONLY | os.O_CREAT, 0o600))
BMC_CREDENTIALS = str(Path(__file__).resolve().parents[1] / "fixtures" / "power" / "bmc-credentials")


def _private(name: str, text: str) -> str:
    """A secret file the spec names: 0600, the test's own (spec/rules_images.py refuses others; git keeps no modes)."""
    path = Path(tempfile.mkdtemp(prefix="corral-hostile-")) / name
    path.write_text(text)
    path.chmod(0o600)
    return str(path)


UPSTREAM_CREDENTIALS = _private("ngc-credentials", "$oauthtoken:nvapi-not-a-key\n")
REGISTRY_KEY = _private("registry.key", "-----BEGIN PRIVATE KEY-----\n")

# --- the base spec: every optional section set, so that every string field is reachable ----------

BASE: dict[str, Any] = {
    "name": "lab",
    "scheduler": "slurm",
    "ssh": {"user": "corral", "key": "keys/id_ed25519", "port": 22, "jump_host": "admin@bastion.example.com:2222"},
    "nodes": [  # the first occurrence of a field is the one fuzzed: unreferenced names come first
        {"names": "login1", "addresses": "10.213.0.20", "roles": ["login"], "os": "debian-12"},
        {"names": "gpu[01-02]", "addresses": ["10.213.0.11", "10.213.0.12"], "roles": ["compute"],
         "memory_mb": 515000,
         "gpus": {"model": "h100", "count": 4, "memory_gib": 80, "nvlink": True,
                  "mig": [{"gpus": "0-1", "profiles": ["3g.40gb", "3g.40gb"]}]},
         "overrides": {"gpu02": {"address": "10.213.0.99", "roles": ["compute"], "memory_mb": 256000,
                                 "gpus": {"model": "h100", "count": 4, "memory_gib": 80,
                                          "mig": [{"gpus": "all", "profiles": ["7g.80gb"]}]}}}},
        {"names": "ctl1", "addresses": ["10.213.0.10"], "roles": ["controller", "accounting", "monitoring", "nfs"],
         "memory_mb": 16384},
    ],
    "storage": {"exports": [{"path": "/srv/nfs/home", "clients": "cluster", "options": ["rw", "sync", "root_squash", "no_subtree_check"]}],
                "mounts": [{"path": "/home", "export": "/srv/nfs/home", "options": ["rw", "hard"],
                            "packages": ["nfs-common"]},
                           {"path": "/lustre", "fstype": "lustre", "source": "10.0.0.5@tcp:/lustre",
                            "nodes": "gpu[01-02]"},
                           {"path": "/nas", "server": "nas.example.com", "export": "/export/data",
                            "roles": ["compute", "login", "controller"]}]},
    "groups": [{"name": "ml", "gid": 3000}],
    "users": [{"name": "alice", "uid": 2001, "group": "ml", "groups": ["ml"], "shell": "/bin/bash",
               "full_name": "Alice Liddell", "ssh_keys": ["ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIMSXy+IKfJbqAmbJkf7ll8wgnvkLQm81CplM7d4miOLT alice@laptop"],
               "accounts": ["research"], "default_qos": "normal"}],
    "identity": {"homes": "/home", "adopt_exempt_users": ["ops"],
                 "ldap": {"uri": ["ldaps://ldap.example.com:636"], "base": "dc=example,dc=com",
                          "ca_cert": LDAP_CA, "bind_dn": "cn=reader,dc=example,dc=com",
                          "bind_password_file": LDAP_BIND, "login_groups": ["hpc-users"],
                          "admin_groups": ["hpc-admins"]}},
    "software": {"root": "/nas/sw", "site_trees": ["/opt/site/modules"], "openmpi": True,
                 "easybuild": {"user": "alice", "build_node": "gpu01", "prefix": "/nas/sw/eb",
                               "robot_paths": ["/opt/site/easyconfigs"], "time_limit": "2h"}},
    "workbench": {"jupyterhub": {"node": "login1", "port": 8443, "tls": {"cert": HUB_CERT, "key": HUB_KEY},
                                 "names": ["hub.example.com"], "partitions": ["gpu"], "gpu_types": ["h100"],
                                 "max_gpus": 4, "max_cpus": 8, "max_memory_gb": 32, "default_time": "1h",
                                 "max_time": "4h", "idle_timeout": "30m", "admins": ["alice"]}},
    "audit": {"declared": [{"roles": ["controller"], "unit": "slapd.service", "user": "openldap",
                            "why": "the site's directory", "root": ["slapd"],
                            "listens": [{"port": 389, "proto": "tcp", "on": "any", "who": "SSSD on every node"}]}]},
    "slurm": {
        "version": "22.05", "clean_jobs": True, "rest": {"clients": ["login", "10.9.0.0/24"]}, "job_tmp_path": "/var/lib/slurm/job_tmp",
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
        "state_save_location": "/nas/slurmctld",  # on a mount: slurmctld's RequiresMountsFor drop-in
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
                    "key_fingerprint": "B53AE77BADB630A683046005963FA27710458545", "version": "10.4.2"},
        "dcgm_exporter": {"package": "datacenter-gpu-manager-exporter", "version": "4.1.1-1",
                          "binary": "/usr/bin/dcgm-exporter",
                          "repo_url": "https://developer.download.nvidia.com/compute/cuda/repos"},
    },
    "nvidia": {
        "driver": {"version": "550.127.05", "branch": "550", "package": "nvidia-driver-550-server",
                   "repo_url": "https://developer.download.nvidia.com/compute/cuda/repos",
                   "repo_fingerprint": "EB693B3035CD5710E231E123A4B469963BF863CC"},
        "dcgm": {"package": "datacenter-gpu-manager-4-cuda12", "version": "1:4.1.1-1"},
        "cuda_toolkit": {"version": "12.4"},
        "container_toolkit": {"engine": "docker", "version": "1.16.2-1",
                              "repo_url": "https://nvidia.github.io/libnvidia-container",
                              "repo_fingerprint": "C95B321B61E88C1809C4F759DDCAE044F796ECB0"},
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
    "topology": {"switches": [{"name": "spine", "switches": ["leaf1"]}, {"name": "leaf1", "nodes": "gpu[01-02]"}]},
    "fabric": {"env": {"NCCL_DEBUG": "WARN"}},
    "power": {"enabled": True, "suspend_after": "30m", "resume_timeout": "10m", "suspend_timeout": "2m",
              "exclude": "gpu02",
              "bmc": {"credentials_file": BMC_CREDENTIALS, "nodes": [{"names": "gpu01", "addresses": "10.9.0.11"},
                                                                    {"names": "gpu02", "address": "bmc2.example.com:443"}]}},
    "backup": {"dir": "backups", "keep": 3},
    "images": {"podman": True,
               "registry": {"node": "ctl1", "port": 5000, "storage": "/srv/registry", "site": True,
                            "tls": {"cert_file": LDAP_CA, "key_file": REGISTRY_KEY}, "metrics_port": 5051,
                            "push_group": "ml",
                            "cache": [{"upstream": "nvcr.io", "port": 5001, "credentials_file": UPSTREAM_CREDENTIALS}]}},
    "rollout": {"canary": 1, "batch": "50%", "max_failed": 1, "drain_timeout": "1h"},
    "proxy": {"http": "http://proxy.example.com:3128", "https": "http://proxy.example.com:3128",
              "no_proxy": [".example.com", "10.0.0.0/8"]},
    "packages": {"upgrade": "security", "hold": ["libc6"], "bundle": "bundles/site.tar", "serve": "10.0.0.1:8079",
                 "fingerprint": "061F24D636B3B4FCDAD6B3FC5727942E553E5015"},
    "reports": {"gpu_hour_cost": {"h100": 2.5}, "currency": "EUR"},
    "acceptance": {"dcgm_diag_level": 1,
                   "burn": {"enabled": True, "seconds": 60, "floor_tflops": {"h100": 30.0},
                            "version": "671f4be92477ce01cd9b536bc534a006dbee058f",
                            "url": "https://github.com/wilicc/gpu-burn/archive/{version}.tar.gz", "sha256": SHA},
                   "nccl": {"enabled": True, "floor_busbw_gbps": 200.0, "version": "2.17.10",
                            "url": "https://github.com/NVIDIA/nccl-tests/archive/refs/tags/v{version}.tar.gz",
                            "sha256": SHA, "nccl_version": "2.21.5-1+cuda12.4"}},
}
BASE["kubernetes"] = {"version": "1.31.4", "pod_cidr": "10.244.0.0/16", "service_cidr": "10.96.0.0/12",
                      "cni": {"plugin": "cilium", "version": "1.16.5"},
                      "control_plane_endpoint": {"address": "10.213.0.5", "interface": "eth0", "port": 6443},
                      "gpu_operator": {"version": "v24.9.1", "driver": {"source": "operator"},
                                       "mig_strategy": "mixed"},
                      "nodes": [{"names": "gpu01", "labels": {"example.com/team": "vision"},
                                 "taints": [{"key": "dedicated", "value": "vision", "effect": "NoSchedule"}]}]}
# a Kubernetes cluster for the kubernetes: leaves (three control-plane nodes behind the virtual IP, two GPU
# workers, one with a MIG layout), rendered with render/kubernetes.py and render/gpu_operator.py
K8S_NODES = [{"names": "cp[1-3]", "addresses": "10.213.0.[10-12]", "roles": ["control-plane"]},
             {"names": "gpu[01-02]", "addresses": "10.213.0.[21-22]", "roles": ["worker"],
              "gpus": {"model": "a100", "count": 8, "mig": [{"gpus": "all", "profiles": ["3g.40gb", "3g.40gb"]}]}}]
BASE_VIRTUAL: dict[str, Any] = {**BASE, "virtual": {"bridge": "corral0", "subnet": "10.213.0.0/24"},
                                 "power": {**BASE["power"], "enabled": False}}  # BMCs of a real cluster
# Nodes for a leaf outside `nodes`: a controller and two GPU nodes, no MIG (that would ask for mig_parted's sums)
MIN_NODES = [{"names": "ctl1", "addresses": "10.213.0.10",
              "roles": ["controller", "accounting", "monitoring", "login", "nfs"]},
             {"names": "gpu[01-02]", "addresses": "10.213.0.[11-12]", "roles": ["compute"],
              "gpus": {"model": "h100", "count": 4}}]
# A leaf whose values would otherwise always fail a cross-check before reaching a renderer
TWEAKS: dict[str, dict[tuple, Any]] = {
    "nvidia.enroot.packages[]": {("nvidia", "enroot", "sha256"): "skip"},      # else: no sha256 for <value>
    "nvidia.mig_parted.packages[]": {("nvidia", "mig_parted", "sha256"): "skip"},
    "topology.blocks[].name": {("slurm",): {"version": "23.11"}},  # topology/block: Slurm >= 23.11
    "topology.blocks[].nodes": {("slurm",): {"version": "23.11"}},
}
# topology/block instead of topology/tree (one or the other): its leaves come from here, with Slurm 23.11
BASE_BLOCKS: dict[str, Any] = {**BASE, "topology": {"blocks": [{"name": "nvl1", "nodes": "gpu[01-02]"}]}}
# topology discovered from a saved ibnetdiscover output (the file must exist: absolute, loads from anywhere)
FABRIC_FILE = str(Path(__file__).resolve().parents[1] / "fixtures" / "fabric" / "virtual.txt")
BASE_FABRIC: dict[str, Any] = {**BASE, "topology": {"discover": "infiniband", "ibnetdiscover_file": FABRIC_FILE}}


NEEDS = {("slurm", "partitions"): ("qos",), ("slurm", "accounts"): ("qos",), ("nvidia", "pyxis"): ("enroot",),
         ("storage", "mounts"): ("exports",), ("storage", "exports"): ("mounts",),
         ("identity", "homes"): ("ldap",), ("topology", "ibnetdiscover_file"): ("discover",),
         ("software", "site_trees"): ("root",), ("software", "openmpi"): ("root",),
         ("software", "easybuild"): ("root",),  # the root on a mount
         ("slurm", "job_tmp_path"): ("clean_jobs",)}  # homes reach sssd.conf's fallback_homedir
# what a section refers to; storage is in every doc (the nfs role); software.easybuild.user is one of users:
TOP_NEEDS = {"users": ("groups", "slurm"), "workbench": ("software", "slurm", "users", "groups"),
             "software": ("users", "groups", "slurm"),
             "acceptance": ("nvidia",),   # the burn and nccl-tests are built with nvidia.cuda_toolkit's nvcc
             "images": ("groups",)}  # images.registry.push_group is one of groups:


@lru_cache(maxsize=None)
def _minimal_base(leaf_id: str, path: tuple) -> str:
    full = (BASE_VIRTUAL if path[0] == "virtual" else BASE_BLOCKS if path[:2] == ("topology", "blocks")
            else BASE_FABRIC if path[:2] in (("topology", "discover"), ("topology", "ibnetdiscover_file")) else BASE)
    doc: dict[str, Any] = {"name": full["name"], "nodes": MIN_NODES, "storage": full["storage"]}
    top = path[0]
    if top == "kubernetes":  # the whole section, on a Kubernetes cluster (the Operator's driver needs its version)
        return json.dumps({"name": full["name"], "scheduler": "kubernetes", "nodes": K8S_NODES,
                           "nvidia": {"driver": {"version": "550.127.05"}}, "kubernetes": full["kubernetes"]})
    for other in TOP_NEEDS.get(top, ()):
        doc[other] = full[other]
    if top == "workbench":  # the hub's login node beside the minimal nodes
        doc["nodes"] = [*MIN_NODES, {"names": "login1", "addresses": "10.213.0.20", "roles": ["login"]}]
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

PARSED_FROM_STR = (ipaddress.IPv4Address, ipaddress.IPv6Address, ipaddress.IPv4Network, ipaddress.IPv6Network)


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
    _walk(ClusterSpec, BASE_BLOCKS, (), "", found)
    _walk(ClusterSpec, BASE_FABRIC, (), "", found)
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
