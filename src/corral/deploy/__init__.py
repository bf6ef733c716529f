"""pyinfra deploys, one module per component. Each is a `@deploy` function taking no arguments
that reads its node from `host.data.corral_node` (and the cluster from `host.data.corral_cluster`);
the engine (corral.engine.run) plans or applies them."""


def components(cluster) -> list:
    """The deploys `corral plan/apply` run for this cluster, in order."""
    from corral.deploy.smoke import smoke
    return [smoke]
