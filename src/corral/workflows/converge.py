"""Plan or apply every component of the cluster (what `corral plan/apply/up` run)."""

from __future__ import annotations

import time

from corral.deploy import components
from corral.deploy.context import gather, mark_job_hooks
from corral.engine import journal, run
from corral.engine.timing import phase
from corral.errors import CorralError, UsageError
from corral.workflows import batches, mig_rollout, removal_phase, rollout, slurm_upgrade, upgrade_rollout
from corral.engine.results import RunResult
from corral.spec.rules import spec_warnings
from corral.spec.rules_rollout import policy
from corral.spec.cluster import Cluster


def converge(cluster: Cluster, mode: str = "apply", *, limit: list[str] | None = None, on_event=None,
             command: str | None = None, say=None, force: bool = False, backup=None,
             rollout_only: list[str] | None = None) -> RunResult:
    """Plan or apply every component; in apply, then roll out the changes that need a reboot
    (workflows/rollout.py), then MIG layouts (workflows/mig_rollout.py), then package upgrades
    (workflows/upgrade_rollout.py), each under the rollout policy, then a Slurm upgrade (workflows/slurm_upgrade.py:
    backup, slurmdbd, slurmctld, slurmd under the policy), and journal the run again with their steps.
    With packages.source: bundle, a package the bundle lacks is refused first (bundle/coverage.py)."""
    from corral.bundle.coverage import refuse_gaps
    from corral.workflows.bundle_serve import serving
    if mode == "apply" and cluster.spec.scheduler == "kubernetes" and cluster.spec.virtual is not None:
        raise UsageError("the virtual cluster cannot run Kubernetes: no kubelet runs in its containers and its "
                         "nodes reach no repository but corral's (docs/components/kubernetes.md)",
                         value="scheduler: kubernetes", fix="`corral plan` shows what apply would change; apply a "
                                                           "Kubernetes spec to real nodes")
    refuse_gaps(cluster)
    with serving(cluster):  # packages.serve: the bundle's repository, for this run only
        return _converge(cluster, mode, limit=limit, on_event=on_event, command=command, say=say, force=force,
                         backup=backup, rollout_only=rollout_only)


def _fabric_warnings(cluster: Cluster) -> list[str]:
    """What `topology: {discover: infiniband}` found amiss (render/topology.py), from what the run read."""
    if cluster.spec.topology is None or not cluster.spec.topology.discover:
        return []
    from corral.deploy.fabric import cached
    from corral.render.topology import discovery_warnings
    try:
        return discovery_warnings(cluster, cached(cluster))
    except CorralError as exc:
        return [f"topology.discover: {exc}"]


def _converge(cluster: Cluster, mode: str, *, limit, on_event, command, say, force, backup,
              rollout_only) -> RunResult:
    result = removal_phase.around(cluster, mode, lambda: run(  # nodes taken out of the spec: workflows/removal.py
        cluster, components(cluster), mode=mode, limit=limit, on_event=on_event, command=command or mode,
        prepare=gather(cluster)), limit=limit, force=force, command=command or mode, say=say)
    result.warnings[:0] = spec_warnings(cluster)  # sha256: skip, allow_http: said on every run
    result.warnings += _fabric_warnings(cluster)
    if mode != "apply":
        show_rollouts(cluster, result)
        return result
    if cluster.spec.scheduler == "kubernetes":
        return _kubernetes_after(cluster, result, say)
    mark_job_hooks(cluster, result)
    chosen = set(rollout_only) if rollout_only is not None else None  # apply --rollout-only NODES
    nodes = batches.only(result, rollout.WHAT, rollout.pending(result), chosen)
    start = time.monotonic()
    if nodes:
        timed(result, rollout.WHAT, lambda: rollout.roll_out(cluster, result, nodes, say))
    stopped = batches.not_started(result, rollout.WHAT)  # a stopped driver rollout: those nodes stay as they are
    mig_nodes = batches.only(result, mig_rollout.WHAT, [n for n in mig_rollout.pending(result) if n not in stopped],
                             chosen)
    if mig_nodes:
        controllers = [n.name for n in cluster.with_role("controller")]

        def follow(ready: list[str]) -> RunResult:
            return run(cluster, components(cluster), mode="apply", limit=sorted(set(controllers + ready)),
                       on_event=on_event, command=f"{command or mode} (after MIG)", prepare=gather(cluster))
        timed(result, mig_rollout.WHAT, lambda: mig_rollout.roll_out(cluster, result, mig_nodes, follow, say))
    stopped |= batches.not_started(result, mig_rollout.WHAT)
    up_nodes = batches.only(result, upgrade_rollout.WHAT, [n for n in upgrade_rollout.pending(result)
                                                           if n not in stopped and result.nodes[n].ok], chosen)
    if up_nodes:
        timed(result, upgrade_rollout.WHAT, lambda: upgrade_rollout.roll_out(cluster, result, up_nodes, say))
    slurm_nodes = slurm_upgrade.pending(result) if chosen is None else []  # it changes the controllers too
    if chosen is not None and slurm_upgrade.pending(result):
        result.warnings.append("slurm upgrade: not run with --rollout-only (it changes slurmdbd and slurmctld too)")
    if slurm_nodes:
        timed(result, slurm_upgrade.WHAT, lambda: slurm_upgrade.roll_out(cluster, result, slurm_nodes, backup, say))
    if nodes or mig_nodes or up_nodes or slurm_nodes:
        _journal_again(cluster, result, start)
    return result


def _journal_again(cluster: Cluster, result: RunResult, start: float) -> None:
    """The run journaled again with what came after the components (rollouts, joins), and their time."""
    result.duration_s += time.monotonic() - start
    try:
        journal.record(cluster.state_dir, result)
    except CorralError as exc:
        result.warnings.append(f"journal not written: {exc}")


def _kubernetes_after(cluster: Cluster, result: RunResult, say) -> RunResult:
    """apply on a Kubernetes cluster: the pending joins (workflows/k8s_join.py), then a pending upgrade
    (workflows/k8s_upgrade.py), journaled with the run."""
    from corral.workflows import k8s_join, k8s_upgrade
    joins, upgrades = k8s_join.pending(result), k8s_upgrade.pending(result)
    if not joins and not upgrades:
        return result
    start = time.monotonic()
    if joins:
        timed(result, k8s_join.WHAT, lambda: k8s_join.join(cluster, result, say))
    if upgrades:
        timed(result, k8s_upgrade.WHAT, lambda: k8s_upgrade.roll_out(cluster, result, upgrades, say))
    _journal_again(cluster, result, start)
    return result


def timed(result: RunResult, what: str, step) -> None:
    """A rollout, journaled as a phase of the run (engine/timing.py)."""
    since = time.monotonic()
    try:
        step()
    finally:
        result.timing.append(phase(what, "rollout", since))


def show_rollouts(cluster: Cluster, result: RunResult) -> None:
    """plan: the batches each pending rollout would go through (result.rollouts, state "planned")."""
    p = policy(cluster.spec)
    if cluster.spec.scheduler == "kubernetes":
        from corral.workflows import k8s_upgrade
        if k8s_upgrade.pending(result):
            result.rollouts.append(k8s_upgrade.planned(cluster, k8s_upgrade.pending(result)))
        return
    for what, nodes in ((rollout.WHAT, rollout.pending(result)), (mig_rollout.WHAT, mig_rollout.pending(result)),
                        (upgrade_rollout.WHAT, upgrade_rollout.pending(result))):
        if nodes:
            result.rollouts.append(batches.planned(what, nodes, p))
    slurm = slurm_upgrade.planned(cluster, result, p)
    if slurm:
        result.rollouts.append(slurm)
