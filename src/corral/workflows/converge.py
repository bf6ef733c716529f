"""Plan or apply every component of the cluster (what `corral plan/apply/up` run)."""

from __future__ import annotations

import time

from corral.deploy import components
from corral.deploy.context import gather, mark_job_hooks
from corral.engine import journal, run, run_context
from corral.engine.timing import phase
from corral.errors import CorralError, UsageError
from corral.workflows import batches, flows, images_load, node_rollout, removal_phase
from corral.engine.handoff import K8S_JOIN
from corral.workflows.driver_rollout import DRIVER
from corral.workflows.k8s_upgrade import KUBERNETES
from corral.workflows.mig_rollout import MIG
from corral.workflows.node_rollout import Env
from corral.workflows.slurm_upgrade import SLURM
from corral.workflows.upgrade_rollout import PACKAGES
from corral.engine.results import RunResult
from corral.spec import schedulers
from corral.spec.rules import spec_warnings
from corral.spec.cluster import Cluster
from corral.spec.hosts import compress_names

# each scheduler's rollouts after the components, in this order (workflows/node_rollout.py: each one
# declaration), named by its flows (workflows/flows.py `rollouts`)
SLURM_ROLLOUTS = (DRIVER, MIG, PACKAGES, SLURM)
KUBERNETES_ROLLOUTS = (KUBERNETES,)


def converge(cluster: Cluster, mode: str = "apply", *, limit: list[str] | None = None, on_event=None,
             command: str | None = None, say=None, force: bool = False, backup=None,
             rollout_only: list[str] | None = None) -> RunResult:
    """Plan or apply every component; in apply, then the scheduler's rollouts in order (the driver
    (workflows/driver_rollout.py), MIG layouts (workflows/mig_rollout.py), package upgrades
    (workflows/upgrade_rollout.py), each under the rollout policy, then a Slurm upgrade (workflows/slurm_upgrade.py:
    backup, slurmdbd, slurmctld, slurmd under the policy); on Kubernetes the joins, then its upgrade), and
    journal the run again with their steps.
    With packages.source: bundle, a package the bundle lacks is refused first (bundle/coverage.py), and so
    are images it carries for a spec without a site registry; after apply they are loaded into the site
    registry (workflows/images_load.py)."""
    from corral.workflows.bundle_serve import serving
    from corral.workflows.driver_branch import resolve
    preflight(cluster, mode)
    cluster, resolved = resolve(cluster)  # nvidia.driver.branch -> the exact version this run holds
    with serving(cluster):  # packages.serve: the bundle's repository, for this run only
        result = _converge(cluster, mode, limit=limit, on_event=on_event, command=command, say=say, force=force,
                           backup=backup, rollout_only=rollout_only)
    if resolved:
        result.warnings.insert(0, resolved)
    return result


def preflight(cluster: Cluster, mode: str) -> None:
    """What must hold before a run changes anything, in one place; each refusal names what to do."""
    from corral.bundle.coverage import refuse_gaps
    if mode == "apply" and cluster.spec.virtual is not None and schedulers.of(cluster).not_virtual:
        raise UsageError("the virtual cluster cannot run Kubernetes: no kubelet runs in its containers and its "
                         "nodes reach no repository but corral's (docs/components/kubernetes.md)",
                         value="scheduler: kubernetes", fix="`corral plan` shows what apply would change; apply a "
                                                           "Kubernetes spec to real nodes")
    images_load.refuse_without_registry(cluster)  # a bundle's images need a site registry
    refuse_gaps(cluster)  # a package the spec needs and the bundle lacks


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
        prepare=prepared(cluster, rollout_only)), limit=limit, force=force, command=command or mode, say=say)
    result.warnings[:0] = spec_warnings(cluster)  # sha256: skip, allow_http: said on every run
    result.warnings += _fabric_warnings(cluster)
    result.warnings += [f"{op}: left as it is on {compress_names(names)} (not in --rollout-only); a later apply "
                        "changes it" for op, names in node_rollout.held_back(result).items()]
    if mode != "apply":
        show_rollouts(cluster, result)
        images_load.load(cluster, result)  # what apply would push into the site registry
        return result
    result = flows.of(cluster).after_apply(cluster, result, on_event=on_event, command=command or mode,
                                                       say=say, backup=backup, rollout_only=rollout_only)
    start = time.monotonic()
    if images_load.load(cluster, result):  # the bundle's images into the site registry
        result.timing.append(phase("bundle images", "rollout", start))
        _journal_again(cluster, result, start)
    return result


def prepared(cluster: Cluster, rollout_only: list[str] | None):
    """The run's prepare hook: the facts every deploy needs (deploy/context.py `gather`), and `apply
    --rollout-only`'s nodes in the run's context, so that a deploy whose change a rollout carries out leaves
    the other nodes as they are (deploy/mig.py) instead of handing the rollout a change it will not make."""
    gathered = gather(cluster)
    if rollout_only is None:
        return gathered

    def prepare(state, hosts) -> None:
        run_context.current().rollout_only = frozenset(rollout_only)
        gathered(state, hosts)
    return prepare


def slurm_after(cluster: Cluster, result: RunResult, *, on_event, command, say, backup, rollout_only) -> RunResult:
    """apply on a Slurm cluster: the job hooks marked, then its rollouts in order (driver, MIG, package
    upgrade, Slurm upgrade), journaled with the run."""
    mark_job_hooks(cluster, result)
    controllers = [n.name for n in cluster.with_role("controller")]

    def follow(ready: list[str]) -> RunResult:  # the MIG rollout: Slurm follows the new devices
        return run(cluster, components(cluster), mode="apply", limit=sorted(set(controllers + ready)),
                   on_event=on_event, command=f"{command} (after MIG)", prepare=prepared(cluster, rollout_only))
    env = Env(say=say or (lambda line: None), backup=backup, follow=follow)
    chosen = set(rollout_only) if rollout_only is not None else None  # apply --rollout-only NODES
    start = time.monotonic()
    if run_rollouts(cluster, result, flows.of(cluster).rollouts, env, chosen):
        _journal_again(cluster, result, start)
    return result


def run_rollouts(cluster: Cluster, result: RunResult, rollouts, env: Env, chosen: set[str] | None = None) -> bool:
    """Each rollout on its pending nodes, in order; the nodes a stopped rollout left untouched are
    left alone by the later ones (but a whole-cluster one, the Slurm upgrade, which --rollout-only
    does not run). True when any ran."""
    stopped: set[str] = set()
    ran = False
    for decl in rollouts:
        nodes = node_rollout.pending(result, decl.kind)
        if decl.whole_cluster and chosen is not None:
            if nodes:
                result.warnings.append(f"{decl.what}: not run with --rollout-only ({decl.whole_cluster})")
            continue
        if not decl.whole_cluster:
            nodes = batches.only(result, decl.what, [n for n in nodes if n not in stopped], chosen)
        if nodes:
            timed(result, decl.what, lambda: node_rollout.roll_out(decl, cluster, result, nodes, env))
            ran = True
        stopped |= batches.not_started(result, decl.what)
    return ran


def _journal_again(cluster: Cluster, result: RunResult, start: float) -> None:
    """The run journaled again with what came after the components (rollouts, joins), and their time."""
    result.duration_s += time.monotonic() - start
    try:
        journal.record(cluster.state_dir, result)
    except CorralError as exc:
        result.warnings.append(f"journal not written: {exc}")


def kubernetes_after(cluster: Cluster, result: RunResult, *, say, **_) -> RunResult:
    """apply on a Kubernetes cluster: the pending joins (workflows/k8s_join.py), then a pending upgrade
    (workflows/k8s_upgrade.py), journaled with the run."""
    from corral.workflows import k8s_join
    joins = node_rollout.pending(result, K8S_JOIN)
    start = time.monotonic()
    if joins:
        timed(result, k8s_join.WHAT, lambda: k8s_join.join(cluster, result, say))
    if run_rollouts(cluster, result, flows.of(cluster).rollouts, Env(say=say or (lambda line: None))) \
            or joins:
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
    for decl in flows.of(cluster).rollouts:
        nodes = node_rollout.pending(result, decl.kind)
        entry = node_rollout.planned(decl, cluster, result, nodes) if nodes else None
        if entry:
            result.rollouts.append(entry)
