"""The ops a deploy adds per node, planned without SSH (pyinfra's State over the spec's inventory):
shared by the unit tests of deploys."""

from __future__ import annotations

from pathlib import Path

from pyinfra.api import Config, State
from pyinfra.api.deploy import add_deploy

from corral.engine.inventory import build_inventory
from corral.spec.loader import load_text


def planned_ops(tmp_path: Path, text: str, deploys, *, labelled: bool = True,
                prepare=lambda state: None) -> dict[str, list[str]]:
    """Each node's own ops in order: "deploy | name" (`labelled`) or the name alone (pyinfra shares op
    meta between hosts by position, so each host's ops are read from its own hash order); `prepare`
    sets what a run's context would (e.g. the Slurm version) on the State."""
    cluster = load_text(text, str(tmp_path / "cluster.yaml"))
    inventory = build_inventory(cluster)
    state = State(inventory, Config(), check_for_changes=False)
    prepare(state)
    out: dict[str, list[str]] = {}
    for host in inventory:
        out[host.name] = []
        for deploy in deploys:
            before = len(host.op_hash_order)
            add_deploy(state, deploy, host=host)
            names = [state.ops[host][h].global_arguments["name"] for h in host.op_hash_order[before:]]
            out[host.name] += [f"{deploy.deploy_name} | {n}" for n in names] if labelled else names
    return out
