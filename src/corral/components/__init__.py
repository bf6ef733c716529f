"""What a component *is*, declared once (pure: no pyinfra): its name (the deploy's, the prefix of its op
names in the journal), the pyinfra deploy that applies it, what it waits for on other nodes, the
Debian packages it may install on a node (and why), the vendor packages it may install, and the
daemons a removed node of a role has stopped. Every other view is derived from these declarations
(components/views.py): the deploy list and its ordering (deploy/__init__.py), the packages the virtual
repository and the air-gap bundle carry and coverage checks (bundle/), the daemons removal stops
(workflows/removal.py), and the check that a deploy installs nothing its declaration does not say
(deploy/operations.packages).

The declarations of each scheduler are in components/slurm.py and components/kubernetes.py, in the
order a node runs them; the shared head (base, proxy, package source) in components/common.py.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from corral.spec.cluster import Cluster, Node

Needs = Callable[["Cluster", "Node"], Mapping[str, str]]  # (cluster, node) -> {package: why}
Gate = Callable[["Cluster", "Node"], bool]  # (cluster, node) -> whether the component applies there
LOCAL: tuple[str, ...] = ()


def nothing(cluster: Cluster, node: Node) -> Mapping[str, str]:
    return {}


def everywhere(cluster: Cluster, node: Node) -> bool:
    return True


@dataclass(frozen=True)
class Component:
    """One component. `waits`: the components it waits for on other nodes during apply (LOCAL: none;
    each must come earlier in the list). `packages`: the Debian packages it may install on the node,
    package -> why (the bundle resolves them from Debian's archive). `vendor`: the packages it may
    install from a vendor's repository (NVIDIA's, Grafana's, Kubernetes'), which the vendor part of
    the bundle carries (render/vendor_repos.py). `stops`: role -> the daemons stopped and disabled on a
    node of that role taken out of the spec ("*": any role). `applies`: the nodes it applies to (its
    deploy does nothing elsewhere, render writes none of its files there; components/gates.py)."""

    name: str
    deploy: str  # "module:function" of the pyinfra deploy (imported by deploy/, never here)
    waits: tuple[str, ...] = LOCAL
    packages: Needs = nothing
    vendor: Needs = nothing
    stops: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    applies: Gate = everywhere  # components/gates.py names the others


def gives(names, why: str) -> dict[str, str]:
    """{name: why} for each of `names` (a declaration's packages)."""
    return dict.fromkeys(names, why)
