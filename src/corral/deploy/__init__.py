"""pyinfra deploys, one module per component. Each is a `@deploy` function taking no arguments
that reads its node from `host.data.corral_node` (and the cluster from `host.data.corral_cluster`);
the engine (corral.engine.run) plans or applies them. Which deploys a cluster runs, in which order and
what each waits for on other nodes are the components' declarations (components/)."""

from __future__ import annotations


def deploy_of(component) -> object:
    """The pyinfra deploy of a declaration (deploy/by_component.py, or the one generic deploy of a component declared
    as data), with its `waits_for` (the engine reads it: the names it waits for on other nodes) and its declaration
    (`component`)."""
    from corral.deploy.by_component import DEPLOYS
    from corral.deploy.resources import deploy_for
    d = deploy_for(component) if component.resources is not None else DEPLOYS[component.name]
    if getattr(d, "deploy_name", component.name) != component.name:
        raise ValueError(f"deploy {d.deploy_name!r} is declared as {component.name!r}")
    d.waits_for = component.waits  # type: ignore[attr-defined]
    d.component = component  # type: ignore[attr-defined]
    return d


def components(cluster) -> list:
    """The deploys `corral plan/apply` run for this cluster, in order (each skips nodes it does not
    apply to): the declarations of its scheduler (components/slurm.py, components/kubernetes.py)."""
    from corral.components.views import declared
    return [deploy_of(c) for c in declared(cluster)]

