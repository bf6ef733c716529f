"""Views derived from the declarations (components/__init__.py), never typed again: the components of
the spec's scheduler, the packages each node may install (the virtual repository, the bundle and its
coverage read them), and the daemons a removed node has stopped."""

from __future__ import annotations

from dataclasses import replace

from corral.components import Component


def declared(cluster) -> tuple[Component, ...]:
    """The components of the spec's scheduler, in the order each node runs them."""
    from corral.components import kubernetes, slurm
    return {"slurm": slurm.COMPONENTS, "kubernetes": kubernetes.COMPONENTS}[cluster.spec.scheduler]


def by_name(cluster, name: str) -> Component | None:
    return next((c for c in declared(cluster) if c.name == name), None)


def slurm_conf(cluster) -> dict[str, tuple[str, str]]:
    """The slurm.conf keys components add (their `slurm_conf`): key -> (value, the component's name)."""
    return {k: (v, c.name) for c in declared(cluster) if c.slurm_conf is not None
            for k, v in c.slurm_conf(cluster).items()}


def declared_daemons(cluster, node) -> tuple:
    """The daemons the components that apply to `node` run there (components/daemons.py)."""
    return tuple(d for c in declared(cluster) if c.applies(cluster, node) for d in c.daemons(cluster, node))


def node_packages(cluster, node) -> dict[str, str]:
    """The Debian packages `node` may install -> why (the first component that says so)."""
    out: dict[str, str] = {}
    for c in declared(cluster):
        for package, why in c.packages(cluster, node).items():
            out.setdefault(package, why)
    return out


def on_real_servers(cluster):
    """The cluster as real servers run it: the spec without `virtual:` (chrony, the NFS server and
    clients, perftest... which a virtual node, a container, does without)."""
    if cluster.spec.virtual is None:
        return cluster
    return replace(cluster, spec=cluster.spec.model_copy(update={"virtual": None}))


def package_reasons(cluster, *, real: bool = False) -> dict[str, list[str]]:
    """Every Debian package the spec's nodes may install -> why (each reason once), sorted by name.
    real=True: as real servers would (an air-gap bundle is carried to real servers, whichever spec it
    was built from)."""
    if real:
        cluster = on_real_servers(cluster)
    why: dict[str, set[str]] = {}
    for node in cluster.nodes:
        for c in declared(cluster):
            for package, reason in c.packages(cluster, node).items():
                why.setdefault(package, set()).add(reason)
    return {name: sorted(reasons) for name, reasons in sorted(why.items())}


def packages_for(cluster) -> list[str]:
    return list(package_reasons(cluster))


def may_install(cluster, node, name: str) -> set[str]:
    """What the component `name` may install on `node`: its Debian and its vendor packages (empty for a
    name no declaration has)."""
    c = by_name(cluster, name)
    return set(c.packages(cluster, node)) | set(c.vendor(cluster, node)) if c is not None else set()


def stopped_units(components: tuple[Component, ...], roles) -> list[str]:
    """The daemons stopped and disabled on a removed node with `roles`: each role's own first, then those
    of every node ("*"), each group in the reverse of the order they start (slurmd before munge)."""
    own = [u for c in reversed(components) for role in roles for u in c.stops.get(role, ())]
    every = [u for c in reversed(components) for u in c.stops.get("*", ())]
    return list(dict.fromkeys(own + every))
