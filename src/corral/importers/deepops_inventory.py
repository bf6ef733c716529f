"""Read a DeepOps config directory (INI inventory, group_vars/, host_vars/) and its vocabulary.

Ansible/DeepOps knowledge only; deepops.py maps it to cluster.yaml. Every value keeps where it came
from ("inventory:12", "group_vars/all.yml:38", relative to the config directory)."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ruamel.yaml.comments import CommentedMap
from ruamel.yaml.error import YAMLError

from corral.errors import Problem, SpecError
from corral.importers.deepops_graph import GroupGraph, canon
from corral.importers.deepops_limits import ImportBudget, count_pattern, expand_pattern  # noqa: F401 (re-export)
from corral.spec.yaml_guard import YamlLimitError, guarded_yaml

PLAIN_LINE_RE, PLAIN_RE = re.compile(r"^[^'\"\\#\s]+(?:[ \t]+[^'\"\\#\s]+)*$"), re.compile(r"[ \t]+")
SECTION_RE = re.compile(r"^\[([^\]:\s]+)(?::([a-z]+))?\]\s*(?:[#;].*)?$")
HOST_PORT_RE = re.compile(r"^([^:\[\]]+|[^:]*\[[^\]]*\][^:]*):(\d+)$")
VAR_EXTS, SKIP_EXTS = (".yml", ".yaml", ".json"), (".md", ".txt", ".bak", ".orig", ".swp", ".retry")


@dataclass
class Var:
    value: Any
    where: str  # "group_vars/all.yml:38", relative to the config directory


@dataclass
class Entry:  # an inventory host or group: where it is first named, its variables, its members
    name: str
    where: str
    vars: dict[str, Var] = field(default_factory=dict)
    hosts: list[str] = field(default_factory=list)
    children: list[str] = field(default_factory=list)


ROLE_GROUPS = {"slurm": ("slurm-master", "slurm-node", "slurm-login", "slurm-nfs", "slurm-metric"),
               "kubernetes": ("kube-control-plane", "kube-master", "kube-node", "etcd")}
OTHER_GROUPS = {"slurm": ROLE_GROUPS["slurm"] + ("slurm-cache", "slurm-nfs-client", "slurm-cluster"),
                "kubernetes": ROLE_GROUPS["kubernetes"] + ("k8s-cluster", "calico-rr")}
GROUP_NOTES = {"etcd": "corral runs etcd co-located with the control plane; no separate etcd hosts",
               "slurm-cache": "cluster.yaml has no container-registry-cache role",
               "calico-rr": "cluster.yaml has no Calico route-reflector role"}
@dataclass
class Inventory(GroupGraph):
    base: Path  # the config directory
    path: Path  # the inventory file
    hosts: dict[str, Entry] = field(default_factory=dict)  # in order of first mention
    groups: dict[str, Entry] = field(default_factory=dict)
    group_vars: dict[str, dict[str, Var]] = field(default_factory=dict)  # group_vars/<group>
    host_vars: dict[str, dict[str, Var]] = field(default_factory=dict)  # host_vars/<host>

    _cache: dict[Any, Any] = field(default_factory=dict, init=False, repr=False, compare=False)  # GroupGraph

    def full(self, where: str) -> str:  # 'inventory:12' -> '/path/to/config/inventory:12'
        return str(self.base / where)

    def group_where(self, canonical: str) -> str:
        return next((g.where for n, g in self.groups.items() if canon(n) == canonical), f"{self.path.name}:1")

    def _layers(self, groups: list[str]) -> list[dict[str, Var]]:
        """Variable layers, lowest precedence first: [g:vars] in the inventory, then group_vars/g."""
        ordered = ["all"] + [g for g in dict.fromkeys(groups) if g != "all"]
        return [layer for g in ordered for layer in
                (self.groups[g].vars if g in self.groups else {}, self.group_vars.get(g, {}))]

    def cluster_var(self, name: str, umbrella: str) -> Var | None:  # as the umbrella group sees it
        groups = [g for g in list(self.groups) + list(self.group_vars) if canon(g) == umbrella]
        found = None
        for layer in self._layers(groups):
            found = layer.get(name, found)
        return found

    def _group_vars_of(self, host: str, only: frozenset[str] | None = None) -> dict[str, Var]:
        groups = self.host_groups(host)  # hosts in the same groups share one merged dict

        def make() -> dict[str, Var]:
            merged: dict[str, Var] = {}
            for layer in self._layers(groups):
                merged.update(layer)
            return merged if only is None else {k: v for k, v in merged.items() if k in only}
        return self._cached(("group-vars", tuple(groups), only), make)

    def host_vars_merged(self, host: str, only: frozenset[str] | None = None) -> dict[str, Var]:
        """Its variables (or those named in `only`), in the order Ansible's merge would list them."""
        layers = (self._group_vars_of(host, only), self.hosts[host].vars, self.host_vars.get(host, {}))
        return {k: v for layer in layers for k, v in layer.items() if only is None or k in only}

    def host_var(self, host: str, name: str) -> Var | None:  # host_vars_merged(host).get(name), faster
        for layer in (self.host_vars.get(host, {}), self.hosts[host].vars, self._group_vars_of(host)):
            if name in layer:
                return layer[name]
        return None

    def text(self, var: Var) -> str:  # str(var.value), once per variable however many hosts share it
        return self._cached(("text", id(var)), lambda: str(var.value))

    def resolve(self, text: str) -> list[str] | None:
        """Hosts of a simple Ansible pattern: 'grp', 'grp[0]', 'grp[1:]', 'a,b'; None if too complex."""
        out: list[str] = []
        for item in text.split(","):
            m = re.match(r"^([\w.-]+)(?:\[(\d{0,9})(:?)(\d{0,9})\])?$", item.strip())
            if not m:
                return None
            hosts = self.role_members(canon(m.group(1))) or ([m.group(1)] if m.group(1) in self.hosts else [])
            if m.group(2) or m.group(3):
                lo = int(m.group(2) or 0)
                hi = (int(m.group(4)) if m.group(4) else len(hosts)) if m.group(3) else lo
                hosts = hosts[lo:hi + 1]  # Ansible slices include their end
            out += hosts
        return list(dict.fromkeys(out))


def parse_inventory(inv: Inventory, problems: list[Problem], budget: ImportBudget | None = None) -> None:
    """Syntax problems -> problems; a limit hit (deepops_limits) -> SpecError at once."""
    label, budget = inv.path.name, budget or ImportBudget()
    inv.groups["all"] = Entry("all", f"{label}:1")
    group, kind = inv.groups.setdefault("ungrouped", Entry("ungrouped", f"{label}:1")), "hosts"
    inv._cache.clear()
    try:
        text = budget.read(inv.path)
    except (OSError, UnicodeDecodeError) as exc:
        return problems.append(Problem(str(inv.path), f"cannot read: {exc}", None, "make it UTF-8 text"))
    sets: dict[tuple[str, str], set[str]] = {}  # (group, 'hosts' or 'children') -> its members, to look up

    def members(attr: str) -> set[str]:
        if (group.name, attr) not in sets:  # noqa: B023 - the group of the current section
            sets[group.name, attr] = set(getattr(group, attr))  # noqa: B023
        return sets[group.name, attr]  # noqa: B023

    def new_group(name: str, where: str) -> Entry:
        if name not in inv.groups:
            inv.groups[name] = Entry(name, where)
            budget.groups(inv.full, where, name, len(inv.groups))
        return inv.groups[name]
    for lineno, raw in enumerate(text.splitlines(), 1):
        line, where = raw.strip(), f"{label}:{lineno}"

        def bad(message: str, value: object, fix: str) -> None:
            problems.append(Problem(inv.full(where), message, value, fix))  # noqa: B023
        if not line or line[0] in "#;":
            continue
        if line.startswith("["):
            m = SECTION_RE.match(line)
            if not m or (m.group(2) or "hosts") not in ("hosts", "children", "vars"):
                bad("bad section header", line, "write [group], [group:children] or [group:vars]")
                kind = "skip"
            else:
                group = new_group(m.group(1), where)
                kind = m.group(2) or "hosts"
        elif kind == "vars":
            key, eq, value = (part.strip() for part in line.partition("="))
            if not eq or not re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", key):
                bad(f"[{group.name}:vars] line is not name=value", line, "write one 'name=value' per line")
            else:
                quoted = len(value) >= 2 and value[0] == value[-1] and value[0] in "'\""
                group.vars[key] = Var(value[1:-1] if quoted else value, where)
        elif kind != "skip":
            try:  # shlex is slow; a line of plain words is split the same without it
                plain = PLAIN_LINE_RE.match(line)
                tokens = PLAIN_RE.split(line) if plain else shlex.split(line, comments=True)
            except ValueError as exc:
                bad(f"cannot parse line: {exc}", line, "close the quote")
                continue
            if tokens and kind == "children":
                children = members("children")
                if tokens[0] != group.name and tokens[0] not in children:
                    group.children.append(tokens[0])
                    children.add(tokens[0])
                new_group(tokens[0], where)
            elif tokens:
                _host_line(inv, group, tokens, where, bad, budget, members("hosts"))
    inv._cache.clear()


def _host_line(inv: Inventory, group: Entry, tokens: list[str], where: str, bad: Any, budget: ImportBudget,
               in_group: set[str]) -> None:
    name, hvars = tokens[0], {}
    m = HOST_PORT_RE.match(name)
    if m:  # host:port
        name, hvars["ansible_port"] = m.group(1), Var(m.group(2), where)
    for tok in tokens[1:]:
        key, eq, value = tok.partition("=")
        if not eq or not key:
            return bad(f"host {name!r}: expected name=value after the host name", tok,
                       "write 'host ansible_host=10.0.0.1 name=value ...' on one line")
        hvars[key] = Var(value, where)
    try:
        count = count_pattern(name)
    except ValueError as exc:
        return bad(str(exc), name, "write ranges like gpu[01:16]")
    budget.hosts(inv.full, where, name, count, len(inv.hosts))  # before expanding
    for host in expand_pattern(name):
        known = inv.hosts.setdefault(host, Entry(host, where))
        for key, var in hvars.items():
            old = known.vars.get(key)
            if key == "ansible_host" and old is not None and old.value != var.value:
                bad(f"host {host!r} has two addresses: {old.value} (at {old.where}) and {var.value}",
                    var.value, "give the host one ansible_host, or give the second one another name")
                continue
            known.vars[key] = var
        if host not in in_group:
            group.hosts.append(host)
            in_group.add(host)
    budget.hosts(inv.full, where, name, 0, len(inv.hosts))


def load_vars_file(base: Path, label: str, problems: list[Problem],
                   budget: ImportBudget | None = None) -> dict[str, Var] | None:
    """The YAML vars file base/label as {name: Var}; None if unusable (a Problem says why)."""
    path = base / label
    try:
        text = (budget or ImportBudget()).read(path)
    except (OSError, UnicodeDecodeError) as exc:
        return problems.append(Problem(str(path), f"cannot read vars file: {exc}", None, "check the file"))
    if text.lstrip().startswith("$ANSIBLE_VAULT"):
        return {"(the whole file)": Var("vault", f"{label}:1")}
    try:
        data = guarded_yaml("max_import_bytes").load(text)  # aliases are counted while composing (yaml_guard)
    except YamlLimitError as exc:
        return problems.append(Problem(f"{path}:{exc.line}", exc.message, None, exc.fix))
    except YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        why = getattr(exc, "problem", None) or getattr(exc, "context", None) or str(exc)
        return problems.append(Problem(f"{path}:{mark.line + 1 if mark else 1}",
                                       f"invalid YAML: {why.strip()}", None, "correct the YAML at that line"))
    except Exception as exc:  # noqa: BLE001 - a value ruamel cannot convert, or nesting too deep
        why = " ".join(str(exc).split()) or "nesting too deep"
        return problems.append(Problem(str(path), f"invalid YAML: {why}", None, "correct the YAML"))
    if data is not None and not isinstance(data, CommentedMap):
        return problems.append(Problem(f"{path}:1", "a vars file must be a mapping of names to values",
                                       type(data).__name__, "write 'name: value' lines"))
    return {str(k): Var(v, f"{label}:{data.lc.key(k)[0] + 1}") for k, v in (data or {}).items()}


def load_vars_dir(base: Path, kind: str, problems: list[Problem],
                  budget: ImportBudget | None = None) -> dict[str, dict[str, Var]]:
    """group_vars/ or host_vars/ as {group-or-host: {var: Var}}; entries are files or directories."""
    out: dict[str, dict[str, Var]] = {}
    budget = budget or ImportBudget()  # one for the whole directory
    for entry in sorted((base / kind).iterdir()) if (base / kind).is_dir() else []:
        if entry.name.startswith(".") or entry.name.endswith("~") or entry.suffix in SKIP_EXTS:
            continue
        files = sorted(f for f in entry.iterdir() if f.is_file() and f.suffix in VAR_EXTS) \
            if entry.is_dir() else [entry]
        name = entry.name[:-len(entry.suffix)] if entry.is_file() and entry.suffix in VAR_EXTS else entry.name
        for f in files:
            loaded = load_vars_file(base, f.relative_to(base).as_posix(), problems, budget)
            if loaded is not None:
                out.setdefault(name, {}).update(loaded)
    return out


def read_config(base: Path, inventory: str) -> Inventory:
    """The whole config directory; all syntax problems at once, as one SpecError."""
    inv, problems, budget = Inventory(base=base, path=base / inventory), [], ImportBudget()
    parse_inventory(inv, problems, budget)
    inv.group_vars = load_vars_dir(base, "group_vars", problems, budget)
    inv.host_vars = load_vars_dir(base, "host_vars", problems, budget)
    inv._cache.clear()
    if problems:
        raise SpecError(problems)
    return inv


def jump_host(args: str) -> str | None:
    """user@host[:port] from `-J x`, `-o ProxyJump=x` or `-o ProxyCommand="ssh -W %h:%p [-p N] x"`."""
    m = re.search(r"(?:-J\s*|ProxyJump=)([\w.@:\[\]-]+)", args)
    if m:
        return m.group(1)
    m = re.search(r"ProxyCommand=[\"']?ssh\s([^\"']*)", args)
    words = m.group(1).split() if m else []
    if "-W" not in words:
        return None
    port = words[words.index("-p") + 1] if "-p" in words[:-1] else None
    hosts = [w for i, w in enumerate(words) if not w.startswith("-") and
             (i == 0 or words[i - 1] not in ("-W", "-p", "-i", "-o", "-l", "-F"))]
    return hosts[-1] + (f":{port}" if port else "") if hosts else None
