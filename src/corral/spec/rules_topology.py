"""`topology:`: every name a switch or block refers to exists, the switches form trees, every compute node
is under exactly one leaf (Slurm: "all nodes in the network must be connected to at least one switch";
a node left out could not be given to a job), and topology/block only where Slurm has it (23.11)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from corral.errors import Problem
from corral.spec import schedulers
from corral.spec.hosts import RangeError, expand_names

if TYPE_CHECKING:
    from corral.spec.cluster import Cluster

Where = Callable[..., str]
BLOCK_SINCE = (23, 11)
DEBIAN12_SLURM = (22, 5)  # the virtual cluster's Slurm (Debian 12's slurm-wlm)


def target_slurm(cluster: Cluster) -> tuple[int, int] | None:
    """The Slurm (major, minor) the spec's nodes run: slurm.version, else the release's own (a virtual
    cluster, or a release other than the default); None where it cannot be known offline."""
    v = cluster.spec.slurm.version
    if v:
        try:
            major, minor = v.split(".")[:2]
            return int(major), int(minor)
        except ValueError:
            return None
    from corral.spec.releases import DEFAULT, RELEASES, slurm_tuple
    oses = {g.os for g in cluster.spec.nodes}
    if len(oses) == 1 and oses <= set(RELEASES) and (cluster.spec.virtual is not None or oses != {DEFAULT}):
        return slurm_tuple(oses.pop())  # the release's own Slurm: what its nodes get (a debian-13 spec: 24.11)
    return DEBIAN12_SLURM if cluster.spec.virtual is not None else None


def roots(cluster: Cluster) -> list[str]:
    t = cluster.spec.topology
    children = {c for s in t.switches for c in s.switches}
    return [s.name for s in t.switches if s.name not in children]


def _loop(parent: dict[str, str]) -> list[str]:
    """A chain child -> parent -> ... that comes back to where it started ([] when the switches form trees)."""
    for start in sorted(parent):
        chain, cur = [start], parent[start]
        while cur in parent and cur not in chain:
            chain.append(cur)
            cur = parent[cur]
        if cur == start:
            return [*chain, start]
    return []


def check_topology(cluster: Cluster, where: Where) -> list[Problem]:
    t = cluster.spec.topology
    if t is None:
        return []
    if t.discover:
        return _check_discover(cluster, where)
    kind = "switches" if t.switches else "blocks"
    groups, problems = t.switches or t.blocks, []
    compute = {n.name for n in cluster.with_role("compute")}
    names: dict[str, int] = {}
    seen: dict[str, str] = {}
    for i, g in enumerate(groups):
        if g.name in names:
            problems.append(Problem(where(("topology", kind, i, "name")), f"{g.name!r} is named twice", g.name,
                                    "give every switch or block its own name"))
        names.setdefault(g.name, i)
        try:
            nodes = expand_names(g.nodes) if g.nodes else []
        except RangeError as e:
            problems.append(Problem(where(("topology", kind, i, "nodes")), str(e), g.nodes, "a hostlist: gpu[01-16]"))
            continue
        for n in nodes:
            if n not in compute:
                problems.append(Problem(where(("topology", kind, i, "nodes")), f"{n} is not a compute node of the spec",
                                        n, "name compute nodes only (nodes: with the compute role)"))
            elif n in seen:
                problems.append(Problem(where(("topology", kind, i, "nodes")), f"{n} is already under {seen[n]}", n,
                                        "cable each node to one leaf switch (or put it in one block)"))
            seen.setdefault(n, g.name)
    parent: dict[str, str] = {}
    for i, s in enumerate(t.switches):
        for c in s.switches:
            if c not in names:
                problems.append(Problem(where(("topology", "switches", i, "switches")), f"no switch is named {c!r}",
                                        c, "add it to topology.switches, or correct the name"))
            elif c in parent or c == s.name:
                problems.append(Problem(where(("topology", "switches", i, "switches")),
                                        f"{c!r} is already a child of {parent.get(c, c)!r}", c,
                                        "each switch has one parent: the switches form a tree"))
            parent.setdefault(c, s.name)
    loop = _loop(parent)
    if loop and not problems:
        problems.append(Problem(where(("topology", "switches")), f"the switches form a loop: {' -> '.join(loop)}",
                                loop[0], "a switch is never below itself: leave the top one out of every "
                                         "`switches:` list"))
    if t.route and (t.blocks or (not problems and len(roots(cluster)) != 1)):
        problems.append(Problem(where(("topology", "route")), "routing along the topology needs switches under one "
                                "top (Slurm: the network must be fully connected)", "route: true",
                                "join the top switches under one, or set route: false"))
    left = sorted(compute - set(seen))
    if left and not problems:
        problems.append(Problem(where(("topology", kind)), f"{len(left)} compute node(s) are under no "
                                f"{'switch' if t.switches else 'block'}: {', '.join(left[:6])}", left[0],
                                "Slurm cannot give a node outside the topology to a job: add them"))
    release = target_slurm(cluster)
    if t.blocks and (release is None or release < BLOCK_SINCE):
        said = f"Slurm {release[0]}.{release[1]:02d}" if release else "an unpinned Slurm (slurm.version unset)"
        problems.append(Problem(where(("topology", "blocks")), f"topology/block needs Slurm 23.11 or later; this "
                                f"cluster runs {said}", "blocks", "use switches (topology/tree), or pin "
                                "slurm.version to 23.11 or later"))
    return problems


def fabric_file(cluster: Cluster):
    t = cluster.spec.topology
    from pathlib import Path
    return (cluster.base_dir / Path(t.ibnetdiscover_file).expanduser()).resolve() if t and t.ibnetdiscover_file else None


MAX_FABRIC_BYTES = 64 << 20  # ibnetdiscover of a 10,000-node fabric is a few MB


def _check_discover(cluster: Cluster, where: Where) -> list[Problem]:
    if "topology" not in schedulers.of(cluster).carries:
        return [Problem(where(("topology",)), "topology is Slurm's (topology.conf)", "discover", "remove it")]
    path = fabric_file(cluster)
    if path is None:
        return []
    at = where(("topology", "ibnetdiscover_file"))
    try:
        size = path.stat().st_size if path.is_file() else None
    except OSError as e:
        return [Problem(at, f"cannot read it ({e.strerror})", cluster.spec.topology.ibnetdiscover_file[:80],
                        "give the path of a saved `ibnetdiscover` output")]
    if size is None:
        return [Problem(at, f"{path} does not exist", str(path), "save it on a node of the fabric (`ibnetdiscover > "
                                                                 "fabric.txt`), or drop the key to let corral run it")]
    if size > MAX_FABRIC_BYTES:
        return [Problem(at, f"{size} bytes: more than an ibnetdiscover output ({MAX_FABRIC_BYTES} at most)", str(path),
                        "give the output of `ibnetdiscover`")]
    try:
        text = path.read_text(errors="replace")
    except OSError as e:
        return [Problem(at, f"cannot read {path} ({e.strerror})", str(path), "give a readable file")]
    # a quick look, said without the file's text (the path could name any file); parsed when rendered
    if not any(line.startswith(("Switch\t", "Ca\t")) for line in text.splitlines()):
        return [Problem(at, f"{path} is not an ibnetdiscover output (no Switch or Ca line)", str(path),
                        "give the output of `ibnetdiscover` (infiniband-diags), whole")]
    return []


def topology_warnings(cluster: Cluster) -> list[str]:
    t = cluster.spec.topology
    if t is None or not t.switches:  # a discovered topology's warnings come with its discovery
        return []
    top = roots(cluster)
    if len(top) > 1:
        return [f"topology: {len(top)} top switches ({', '.join(top)}): Slurm gives no job nodes under two of them"]
    return []
