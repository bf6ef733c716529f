"""What a component installs on a node, as data (pure: no pyinfra): its packages, directories, files, files
removed, the commands a changed file triggers, the daemons it runs (each with its restart policy) and those it
no longer runs, in the order they are applied. A component that gives
`resources` (components/__init__.py) needs no deploy code of its own: deploy/resources.py applies them (gate once,
then each in order, as the operations of deploy/operations.py with the same names), and every other view is derived
from the same list, never retyped:
- `corral render`: every file, as apply writes it (`files`; what apply makes on the control host, `Made`, only
  read back, never made);
- the run's snapshot: every path, package and service (`paths`, `packages`, `services`);
- the declaration's packages for the bundle and the virtual repository (`needs`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Union

from corral.render.restart import Policy

if TYPE_CHECKING:
    from corral.spec.cluster import Cluster, Node


@dataclass(frozen=True)
class Listener:
    """A socket a daemon listens on. `on`: "cluster" (the node's cluster address), "any" (every address),
    "local" (loopback only). `port` 0: a port the daemon picks at start (RPC services). `who`: who may reach it."""

    port: int
    who: str
    proto: str = "tcp"
    on: str = "any"


@dataclass(frozen=True)
class Daemon:
    """A daemon a component runs on a node: the systemd unit its processes live in, the user its main process
    runs as and why (always said for root), `root`: the process names (comm, at most 15 characters as the kernel
    keeps them) that run as root in the unit (none
    unless `user` is root, or a setuid helper such as sudo), and the sockets it listens on."""

    unit: str
    user: str
    why: str
    root: tuple[str, ...] = ()
    listens: tuple[Listener, ...] = ()


@dataclass(frozen=True)
class Packages:
    """Debian packages, installed together (one apt-get), each there for `why` (the bundle carries them). `vendor`:
    from a vendor's repository (the declaration's `vendor`, the bundle's vendor part), each name optionally
    `name=version`, installed on their own (`together` False: not in the node's one transaction)."""

    names: tuple[str, ...]
    name: str  # the op's name
    why: str
    vendor: bool = False
    together: bool = True


@dataclass(frozen=True)
class Repository:
    """A vendor's apt repository set up before its packages (`kind` "cuda": NVIDIA's CUDA repository through
    cuda-keyring, deploy/nvidia_repo.py; nothing with packages.source bundle)."""

    name: str
    kind: str
    url: str


@dataclass(frozen=True)
class Key:
    """A vendor's apt signing key at `path`, fetched on the node from `url` and kept only when its fingerprint is
    exactly `fingerprint` (deploy/apt_keys.pinned_key; `dearmor`: as a binary keyring). `corral render` names it in
    NOTES.txt (`vendor`), never writes it."""

    name: str
    path: str
    url: str
    fingerprint: str
    vendor: str
    dearmor: bool = False


@dataclass(frozen=True)
class Skip:
    """The component does nothing on this node, and why (plan lists it; `noted`: `corral render`'s NOTES.txt too)."""

    name: str
    reason: str
    noted: bool = True
    what: str = ""  # how NOTES.txt names the component (its name when empty)


@dataclass(frozen=True)
class Directory:
    path: str
    name: str = ""  # the op's name; the path when empty
    mode: str = "755"
    user: str = "root"
    group: str = "root"


@dataclass(frozen=True)
class Made:
    """Content made on the control host when applied (a CA, a key, a generated secret), read only then: apply calls
    `make`; `corral render` never does. It shows the file an apply made, from `state_file` (under the state dir's
    secrets/), or a placeholder naming it; a secret's content it never shows."""

    make: Callable[[], str | bytes]
    state_file: str
    where: str = ""  # where a secret lives when not in the state dir (an admin's file): render's placeholder names it
    shown: Callable[[], str] | None = None  # what render shows of a secret file instead (its secret as a placeholder)


@dataclass(frozen=True)
class File:
    """A file installed atomically with this content, mode and owner. `secret`: its content never shown (plan's
    diff, render's placeholder); `disruption`: what its change does to the node."""

    path: str
    content: str | bytes | Made
    name: str = ""  # the op's name; the path when empty
    mode: str = "644"
    user: str = "root"
    group: str = "root"
    secret: bool = False
    disruption: str = "none"
    validate: str | None = None  # a check of the new file before it replaces the old one ({} its path: promtool's)


@dataclass(frozen=True)
class Absent:
    """A file corral wrote before and the spec no longer asks for, removed."""

    path: str
    name: str


@dataclass(frozen=True)
class OnChange:
    """Commands run when any of `paths` (files of the same list) changed in this run: each an argv, or a shell line
    of corral's own (no spec value in it)."""

    name: str
    description: str
    paths: tuple[str, ...]
    commands: tuple[tuple[str, ...] | str, ...]


@dataclass(frozen=True)
class Service:
    """A daemon enabled and running (`wait`: a shell test that proves it serves, after a start), and restarted
    (`restart`: that op's name) when any of `restart_on` (files of the same list) changed in this run. `policy`:
    systemd restarts it when it dies (render/restart.py): its drop-in is installed, and systemd reloaded when it
    changed, before the daemon starts (`expanded`, deploy/resources.py); none for a unit of corral's own that carries
    the policy in its text (render/restart.py POLICIES, IN_UNIT)."""

    unit: str
    name: str
    wait: str | None = None
    restart: str = ""
    restart_on: tuple[str, ...] = ()
    policy: Policy | None = None
    restart_wait: str | None = None  # what proves it serves after a restart, where it differs from `wait`
    policy_op: str = ""  # the restart policy's op name, where a hand-written deploy named it otherwise (journals)
    runs: Daemon | None = None  # what `corral audit` expects of it: its user and why, root processes, sockets


@dataclass(frozen=True)
class Restart:
    """`unit` restarted (`verb` "restart") or reloaded ("reload") when any of `on` (files of the same list) changed
    in this run, then proven with `wait`: for a daemon with more than one trigger (a Service's `restart_on` is the
    common case). Nothing when the daemon was not running before this run (its start picked the change up)."""

    unit: str
    name: str
    on: tuple[str, ...]
    wait: str | None = None
    verb: str = "restart"


@dataclass(frozen=True)
class Removed:
    """A daemon and its files gone from a node that no longer runs it (its feature left the spec): when any of
    `paths` is there, `unit` is stopped and disabled, the paths removed and systemd reloaded; nothing otherwise."""

    unit: str
    name: str
    paths: tuple[str, ...]


Resource = Union[Packages, Repository, Key, Skip, Directory, File, Absent, OnChange, Service, Restart, Removed]
Resources = Callable[["Cluster", "Node"], Sequence[Resource]]


def policy_name(unit: str) -> str:
    """The op name of a daemon's restart policy (deploy/operations.restart_policy), as hand-written deploys name it."""
    return f"{unit} restarted by systemd when it dies"


def expanded(items: Sequence[Resource]) -> list[Resource]:
    """The resources as render and the snapshot see them: a Service with a `policy` preceded by its restart drop-in
    (apply installs it with operations.restart_policy, under the same name: a daemon-reload when it changed, left to
    the service's start when that comes next)."""
    from corral.render.restart import dropin_path, render_restart_dropin
    out: list[Resource] = []
    for i in items:
        if isinstance(i, Service) and i.policy is not None:
            out.append(File(dropin_path(i.unit), render_restart_dropin(i.unit, i.policy),
                            i.policy_op or policy_name(i.unit), disruption="none (systemd reloaded)"))
        out.append(i)
    return out


def secret_placeholder(where: str) -> str:
    """What `corral render` writes in place of a secret, WHERE naming where it lives: one line, no quote."""
    return f"<secret:not-rendered:{where}>"


def made_by_apply(state_dir: Path, state_file: str) -> str | bytes:
    """A file apply makes on the control host (under the state dir's secrets/), as `corral render` shows it: read
    back when an apply made it, else a placeholder naming it; never made here."""
    made = Path(state_dir) / "secrets" / state_file
    return made.read_bytes() if made.is_file() else f"<not-rendered:state-dir/secrets/{state_file} (made by apply)>\n"


def shown(item: File, state_dir: Path) -> str | bytes:
    """What `corral render` writes for a file: its content; for one made when applied, the file an apply made (a
    placeholder when none did yet), a secret's never."""
    if not isinstance(item.content, Made):
        return item.content
    if item.secret:
        if item.content.shown is not None:
            return item.content.shown()
        return secret_placeholder(item.content.where or f"state-dir/secrets/{item.content.state_file}")
    return made_by_apply(state_dir, item.content.state_file)


def files(items: Sequence[Resource], state_dir: Path) -> dict[str, str | bytes]:
    """path -> content of every file (render's view: nothing made for it)."""
    return {i.path: shown(i, state_dir) for i in expanded(items) if isinstance(i, File)}


def paths(items: Sequence[Resource]) -> tuple[str, ...]:
    """Every path the component manages (the snapshot reads their state before the run)."""
    out: list[str] = []
    for i in expanded(items):
        if isinstance(i, (Directory, File, Absent, Key)):
            out.append(i.path)
        elif isinstance(i, Removed):
            out += i.paths
    return tuple(out)


def packages(items: Sequence[Resource]) -> tuple[str, ...]:
    """The package names the snapshot reads (a vendor's `name=version` by its name; cuda-keyring for NVIDIA's
    repository)."""
    out = [n.split("=", 1)[0] for i in items if isinstance(i, Packages) for n in i.names]
    return tuple(dict.fromkeys([*("cuda-keyring" for i in items if isinstance(i, Repository) and i.kind == "cuda"),
                                *out]))


def services(items: Sequence[Resource]) -> tuple[str, ...]:
    return tuple(i.unit for i in items if isinstance(i, (Service, Removed)))


def needs(resources: Resources, applies: Callable[[Cluster, Node], bool],
          vendor: bool = False) -> Callable[[Cluster, Node], dict[str, str]]:
    """The declaration's `packages` (package -> why) from its resources, on the nodes it applies to; `vendor`: its
    `vendor` packages instead (by name)."""
    def packages_of(cluster: Cluster, node: Node) -> dict[str, str]:
        if not applies(cluster, node):
            return {}
        return {n.split("=", 1)[0]: i.why for i in resources(cluster, node)
                if isinstance(i, Packages) and i.vendor == vendor for n in i.names}
    return packages_of


def daemons_of(resources: Resources, applies: Callable[[Cluster, Node], bool]) -> Callable[[Cluster, Node], tuple]:
    """The declaration's `daemons` (what `corral audit` expects) from its services, on the nodes it applies to."""
    def daemons(cluster: Cluster, node: Node) -> tuple[Daemon, ...]:
        if not applies(cluster, node):
            return ()
        return tuple(i.runs for i in resources(cluster, node) if isinstance(i, Service) and i.runs is not None)
    return daemons
