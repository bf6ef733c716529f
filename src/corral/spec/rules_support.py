"""Spec check reads the support matrix (spec/support_matrix.py): a combination of release, component and
source marked Refused is refused where the spec asks for it (spec/support_asks.py), naming what to do
instead, unless an older rule refuses it already (the cell's `rule`: rocky-9 at the group's os:, bundles
of Ubuntu nodes, corral's apptainer off Debian 13). DCGM and dcgm-exporter are on by the models' defaults:
where a release has no DCGM and the spec did not say `enabled`, they are skipped on those nodes (the deploy
asks dcgm_unavailable) and spec check says so instead of refusing. Pure: no I/O."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from corral.errors import Problem
from corral.spec.support import COMPONENTS, SOURCES, Refused
from corral.spec.support_asks import asks
from corral.spec.support_matrix import state

if TYPE_CHECKING:
    from corral.spec.cluster import Cluster

Where = Callable[..., str]


def _refusals(cluster: Cluster):
    for ask in asks(cluster):
        cell = state(ask.release, ask.component, ask.source)
        if isinstance(cell, Refused) and cell.rule == "support":
            yield ask, cell


def _names(cluster: Cluster, group: int) -> str:
    return cluster.spec.nodes[group].names


def check_support(cluster: Cluster, where: Where) -> list[Problem]:
    """One problem per refused combination, naming every node group that asks for it."""
    found: dict[tuple, tuple[list[int], Refused]] = {}
    for ask, cell in _refusals(cluster):
        if not ask.defaulted:  # else support_warnings says it
            found.setdefault((ask.release, ask.component, ask.source, ask.at), ([], cell))[0].append(ask.group)
    return [Problem(where(at), f"{COMPONENTS[component]} on {release} ("
                               + ", ".join(f"nodes[{g}]: {_names(cluster, g)}" for g in groups)
                               + f") from {SOURCES[source]}: {cell.why}", f"os: {release}", cell.fix)
            for (release, component, source, at), (groups, cell) in found.items()]


def support_warnings(cluster: Cluster) -> list[str]:
    """A component on by default that a group's release cannot have: skipped there."""
    return [f"{'.'.join(ask.at)} is on by default, but {COMPONENTS[ask.component]} is not installed on {ask.release} "
            f"nodes (nodes[{ask.group}]: {_names(cluster, ask.group)}): {cell.why}; skipped there; {cell.fix}"
            for ask, cell in _refusals(cluster) if ask.defaulted]
