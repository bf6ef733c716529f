"""The expanded cluster: one Node per host, built from the spec and checked across fields."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from corral import limits
from corral.errors import Problem, SpecError
from corral.spec.rules import check_cluster
from corral.spec.hosts import RangeError, count_addresses, count_names, expand_addresses, expand_names
from corral.spec.models import ClusterSpec, GpuSpec

Where = Callable[..., str]


@dataclass(frozen=True)
class Node:
    name: str
    address: str
    roles: tuple[str, ...]
    gpus: GpuSpec | None
    memory_mb: int | None
    group: int  # index in spec.nodes
    os: str = "debian-12"  # the group's OS release (spec/releases.py)

    @property
    def gpu_count(self) -> int:
        return self.gpus.count if self.gpus else 0

    def has(self, role: str) -> bool:
        return role in self.roles


@dataclass
class Cluster:
    spec: ClusterSpec
    path: Path
    nodes: list[Node] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def base_dir(self) -> Path:
        return self.path.resolve().parent

    @property
    def state_dir(self) -> Path:
        return (self.base_dir / Path(self.spec.state_dir).expanduser()).resolve()

    def ssh_key(self) -> Path | None:
        key = self.spec.ssh.key
        return (self.base_dir / Path(key).expanduser()).resolve() if key else None

    def node(self, name: str) -> Node:
        for n in self.nodes:
            if n.name == name:
                return n
        raise KeyError(name)

    def releases(self) -> list[str]:
        """The OS releases of the cluster's nodes (spec `nodes[].os`), in group order, each once."""
        return list(dict.fromkeys(g.os for g in self.spec.nodes))

    def with_role(self, role: str) -> list[Node]:
        return [n for n in self.nodes if role in n.roles]

    def first_user(self) -> str | None:
        """The spec's first user with a Slurm account (else its first user): whom validate's jobs and its notebook
        check run as (the hub's validate service may make a token for this user alone)."""
        users = [u for u in self.spec.users if u.accounts] or list(self.spec.users)
        return users[0].name if users else None

    def spec_hash(self) -> str:
        data = json.dumps(self.spec.model_dump(mode="json"), sort_keys=True)
        return hashlib.sha256(data.encode()).hexdigest()[:16]

    def expanded(self) -> dict:
        """Every section of the spec, defaults filled in, in the model's order, with the node groups
        expanded to their nodes (`corral spec show`). The spec holds secrets only as file paths
        (identity.ldap.bind_password_file, power.bmc.credentials_file): this prints those paths and
        never opens them."""
        data = self.spec.model_dump(mode="json")
        data["nodes"] = [{"name": n.name, "address": n.address, "roles": list(n.roles),
                          "gpus": n.gpus.model_dump(mode="json") if n.gpus else None,
                          "memory_mb": n.memory_mb, "group": n.group, "os": n.os} for n in self.nodes]
        data["state_dir"] = str(self.state_dir)
        data["spec_hash"] = self.spec_hash()
        return data


def _expand_group(spec: ClusterSpec, gi: int, where: Where, problems: list[Problem]) -> list[Node]:
    group = spec.nodes[gi]
    try:
        names = expand_names(group.names, unique=True)
    except RangeError as exc:
        problems.append(Problem(where(("nodes", gi, "names")), str(exc), None,
                                "write names like 'gpu[01-16]' or 'ctl1,login1'"))
        return []
    try:  # counted first: a mismatch is reported without expanding the addresses
        n_addresses = count_addresses(group.addresses)
        addresses = expand_addresses(group.addresses) if n_addresses == len(names) else []
    except RangeError as exc:
        problems.append(Problem(where(("nodes", gi, "addresses")), str(exc), None,
                                "give a list, a range '10.0.0.11-26' or '10.0.0.[11-26]'"))
        return []
    if n_addresses != len(names):
        problems.append(Problem(
            where(("nodes", gi, "addresses")),
            f"{len(names)} names ({group.names}) but {n_addresses} addresses", group.addresses,
            "give exactly one address per name, in the same order"))
        return []
    for oname in group.overrides:
        if oname not in names:
            problems.append(Problem(where(("nodes", gi, "overrides", oname), key=True),
                                    f"override for {oname!r}, which is not in this group ({group.names})",
                                    oname, "name a node of this group"))
    nodes = []
    for name, address in zip(names, addresses):
        o = group.overrides.get(name)
        gpus = group.gpus
        if o and o.gpus:
            patch = o.gpus.model_dump(exclude_none=True)
            if gpus is None and "model" not in patch:
                problems.append(Problem(where(("nodes", gi, "overrides", name, "gpus")),
                                        "GPU override on a group without gpus needs 'model' and 'count'",
                                        patch, "add model: and count:"))
                continue
            gpus = GpuSpec.model_validate({**(gpus.model_dump() if gpus else {"count": 0}), **patch})
        nodes.append(Node(
            name=name,
            address=str(o.address) if o and o.address else address,
            roles=tuple(o.roles) if o and o.roles else tuple(group.roles),
            gpus=gpus if gpus and gpus.count > 0 else None,
            memory_mb=(o.memory_mb if o and o.memory_mb else group.memory_mb),
            group=gi,
            os=group.os,
        ))
    return nodes


def check_node_count(spec: ClusterSpec, where: Where) -> None:
    """Refuse a spec naming more than limits' max_nodes nodes in all, counted before expanding."""
    limit, total = limits.current().max_nodes, 0
    for gi, group in enumerate(spec.nodes):
        try:
            total += count_names(group.names)
        except RangeError:  # malformed: _expand_group reports it, without expanding it
            continue
        if total > limit:
            names = group.names if len(group.names) <= 80 else group.names[:77] + "..."
            raise SpecError([Problem(where(("nodes", gi, "names")),
                                     f"more than {limit} nodes in the spec: the groups up to this one "
                                     f"name {total}", names,
                                     f"split the cluster or {limits.raise_hint('max_nodes')}")])


def build_cluster(spec: ClusterSpec, path: Path, where: Where) -> Cluster:
    check_node_count(spec, where)
    problems: list[Problem] = []
    nodes: list[Node] = []
    for gi in range(len(spec.nodes)):
        nodes.extend(_expand_group(spec, gi, where, problems))
    cluster = Cluster(spec=spec, path=path, nodes=nodes)
    if not problems:
        problems.extend(check_cluster(cluster, where))
    if problems:
        raise SpecError(problems)
    return cluster


def rebuild(spec: ClusterSpec, path: Path) -> Cluster:
    """The cluster of a spec the control host has already checked (a snapshot shipped to a node,
    corral/fanout/): groups expanded, the cross-field rules not run again (some read files that live
    on the control host only, e.g. identity.ldap.ca_cert)."""
    problems: list[Problem] = []
    nodes = [n for gi in range(len(spec.nodes)) for n in _expand_group(spec, gi, lambda *_: "snapshot", problems)]
    if problems:
        raise SpecError(problems)
    return Cluster(spec=spec, path=path, nodes=nodes)
