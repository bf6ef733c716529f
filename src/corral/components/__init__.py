"""What a component *is*, declared once (pure: no pyinfra): its name (the deploy's, the prefix of its op
names in the journal; deploy/by_component.py names its deploy, or it gives its `resources` as data), what it
waits for on other nodes, the
Debian packages it may install on a node (and why), the vendor packages it may install, the daemons a
removed node of a role has stopped, and the daemons it runs on a node: their unit, user (and why), the
processes that run as root there and the sockets they listen on. Every other view is derived from these declarations
(components/views.py): the deploy list and its ordering (deploy/__init__.py), the packages the virtual
repository and the air-gap bundle carry and coverage checks (bundle/), the daemons removal stops
(workflows/removal.py), the check that a deploy installs nothing its declaration does not say
(deploy/operations.packages), and `corral audit`'s declared users, root processes and ports (checks/audit.py).

The declarations of each scheduler are in components/slurm.py and components/kubernetes.py, in the
order a node runs them; the shared head (base, proxy, package source) in components/common.py.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from corral.render.resources import Daemon, Listener  # declared with a component's services (render/resources.py)

if TYPE_CHECKING:
    from corral.render.resources import Resources
    from corral.spec.cluster import Cluster, Node

__all__ = ["Component", "Daemon", "Listener", "LOCAL", "everywhere", "gives", "no_daemons", "nothing"]
Needs = Callable[["Cluster", "Node"], Mapping[str, str]]  # (cluster, node) -> {package: why}
Gate = Callable[["Cluster", "Node"], bool]  # (cluster, node) -> whether the component applies there
LOCAL: tuple[str, ...] = ()


def nothing(cluster: Cluster, node: Node) -> Mapping[str, str]:
    return {}


Daemons = Callable[["Cluster", "Node"], "tuple[Daemon, ...]"]
SlurmConf = Callable[["Cluster"], Mapping[str, str]]  # cluster -> {slurm.conf key: value}


def no_daemons(cluster: Cluster, node: Node) -> tuple[Daemon, ...]:
    return ()


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
    deploy does nothing elsewhere, render writes none of its files there; components/gates.py). `daemons`:
    what it runs on the node (components/daemons.py), which `corral audit` compares the node with. `resources`:
    what it installs as data, in place of a deploy of its own (render/resources.py). `slurm_conf`: the keys it adds
    to slurm.conf (render/slurm.py writes them; slurm.extra may not set them: spec/rules.py)."""

    name: str  # the deploy's too: deploy/by_component.py names each one's, unless it gives `resources`
    waits: tuple[str, ...] = LOCAL
    packages: Needs = nothing
    vendor: Needs = nothing
    stops: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    applies: Gate = everywhere  # components/gates.py names the others
    daemons: Daemons = no_daemons
    # what it installs, as data (render/resources.py): applied by the one generic deploy (deploy/resources.py);
    # its packages, render's files and the snapshot's paths derive from it
    resources: Resources | None = None
    slurm_conf: SlurmConf | None = None

    def __post_init__(self) -> None:
        if self.resources is not None:
            from corral.render.resources import needs
            if self.packages is nothing:
                object.__setattr__(self, "packages", needs(self.resources, self.applies))
            if self.vendor is nothing:
                object.__setattr__(self, "vendor", needs(self.resources, self.applies, vendor=True))
            if self.daemons is no_daemons:
                from corral.render.resources import daemons_of
                object.__setattr__(self, "daemons", daemons_of(self.resources, self.applies))


def gives(names, why: str) -> dict[str, str]:
    """{name: why} for each of `names` (a declaration's packages)."""
    return dict.fromkeys(names, why)
